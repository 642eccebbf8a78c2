package handlers

import (
	"net/http"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// ProblemIndex serves /problems: every problem type the API answers with.
func ProblemIndex(c echo.Context) error {
	all := problems.All()
	out := make([]views.ProblemType, len(all))
	for i, t := range all {
		out[i] = problemView(t)
	}
	return renderPage(c, http.StatusOK, views.ProblemIndex(out))
}

// ProblemPage serves /problems/<slug>, the page a problem's "type" member names.
func ProblemPage(c echo.Context) error {
	t, ok := problems.Lookup(c.Param("slug"))
	if !ok {
		return echo.ErrNotFound
	}
	return renderPage(c, http.StatusOK, views.ProblemPage(problemView(t)))
}

func problemView(t problems.Type) views.ProblemType {
	return views.ProblemType{Slug: t.Slug, URI: t.URI(), Status: t.Status, Title: t.Title,
		Explanation: t.Explanation, WhatToDo: t.WhatToDo, Example: t.Example()}
}
