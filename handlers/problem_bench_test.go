package handlers

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/labstack/echo/v4"
)

// BenchmarkWriteProblem renders the problem a duplicate of an uncertain operation gets: the
// most frequent problem under retries, and the one carrying the most members.
func BenchmarkWriteProblem(b *testing.B) {
	e := echo.New()
	req := httptest.NewRequest(http.MethodPost, "/v1/operations", nil)
	p := &Problem{Slug: problems.OperationUncertain, Detail: "poll it", Op: testOp,
		Location: "/v1/operations/" + testOp.ID, RetryAfter: 5}
	b.ReportAllocs()
	for range b.N {
		rec := httptest.NewRecorder()
		if err := WriteProblem(e.NewContext(req, rec), p); err != nil || rec.Code != http.StatusConflict {
			b.Fatalf("status %d, %v", rec.Code, err)
		}
	}
}
