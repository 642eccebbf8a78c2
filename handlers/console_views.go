package handlers

import (
	"net/http"
	"net/url"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// Saved views: a page's filter kept under a name by a user, listed beside that page's filters,
// and shared by its link (/views/{id}). A view holds the filter, never data: the page it opens
// runs it in the opener's scope.

// viewQuery keeps what a view of page may save from q: that page's filters alone.
func viewQuery(page string, q url.Values) url.Values {
	if page == models.ViewPageReviews {
		return reviewQuery(q)
	}
	return searchQuery(q)
}

// refuseViewQuery refuses to keep a filter its page would refuse to run: above all a search by
// a sensitive param, whose value (a card number, typed) must not be stored and shared by link.
func (h *Console) refuseViewQuery(page string, q url.Values) error {
	if page != models.ViewPageOperations {
		return nil // the queue's filters are choices from lists
	}
	s, err := operationSearch(q)
	if err == nil {
		err = h.refuseSensitive(&s)
	}
	return err
}

// viewPagePath is where a view of page opens.
func viewPagePath(page string) string { return "/" + page }

// viewPageHref is page with query q.
func viewPageHref(page string, q url.Values) string {
	if len(q) == 0 {
		return viewPagePath(page)
	}
	return viewPagePath(page) + "?" + q.Encode()
}

// savedViews is the saved-views panel of page for v, showing the filter q: v's views of the
// page, the form that saves q, and the outcome of the last save or delete (a flash).
func (h *Console) savedViews(c echo.Context, v *Viewer, page string, q url.Values) (views.SavedViews, error) {
	list, err := h.Ledger.SavedViews(c.Request().Context(), v.ID, page)
	if err != nil {
		return views.SavedViews{}, err
	}
	kept := viewQuery(page, q)
	sv := views.SavedViews{Page: page, Query: kept.Encode(), CanSave: len(kept) > 0, CSRFToken: v.CSRFToken}
	for _, view := range list {
		sv.Views = append(sv.Views, views.SavedViewLink{ID: view.ID, Name: view.Name, Href: "/views/" + url.PathEscape(view.ID),
			Current: view.Query == sv.Query && sv.Query != ""})
	}
	if f, ok := h.takeFlash(c); ok {
		sv.Notice = &views.NoticeText{Kind: views.NoticeKind(f.Kind), Message: f.Message}
	}
	return sv, nil
}

// SaveView saves the filter posted with the form under the name typed, for the signed-in user,
// and returns to the page with that filter.
func (h *Console) SaveView(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	page := c.FormValue("page")
	if page != models.ViewPageOperations && page != models.ViewPageReviews {
		return echo.ErrNotFound
	}
	posted, err := url.ParseQuery(c.FormValue("query"))
	if err != nil {
		posted = url.Values{}
	}
	q := viewQuery(page, posted)
	if err := h.refuseViewQuery(page, q); err != nil {
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeError), Message: "Not saved: " + err.Error()})
		return c.Redirect(http.StatusSeeOther, viewPagePath(page))
	}
	saved, err := h.Ledger.SaveView(c.Request().Context(), v.ID, page, c.FormValue("name"), q.Encode())
	switch code := models.ErrorCode(err); {
	case err == nil:
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Message: "Saved “" + saved.Name + "”. Its link shares the filter, never the data: whoever opens it sees only their own tenants."})
	case code == models.CodeInvalid || code == models.CodeConflict:
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeError), Message: "Not saved: " + errDetail(err) + "."})
	default:
		return err
	}
	return c.Redirect(http.StatusSeeOther, viewPageHref(page, q))
}

// OpenView opens a saved view, anyone's: its page with its filter, run in the opener's scope.
func (h *Console) OpenView(c echo.Context) error {
	if _, err := currentViewer(c); err != nil {
		return err
	}
	view, err := h.Ledger.SavedView(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(view.Query)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, viewPageHref(view.Page, viewQuery(view.Page, q)))
}

// DeleteView deletes one of the signed-in user's views and returns to its page with the filter
// that page showed.
func (h *Console) DeleteView(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	view, err := h.Ledger.DeleteView(c.Request().Context(), v.ID, c.Param("id"))
	if err != nil {
		return err
	}
	h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Message: "Deleted the view “" + view.Name + "”."})
	back, err := url.ParseQuery(c.FormValue("query"))
	if err != nil {
		back = url.Values{}
	}
	return c.Redirect(http.StatusSeeOther, viewPageHref(view.Page, viewQuery(view.Page, back)))
}
