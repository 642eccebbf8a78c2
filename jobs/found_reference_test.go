package jobs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// What a look-up found has the downstream's reference even when reconcile.found points at the
// reference itself (a search answering a list, found /data/0/id): an operation settled by a
// look-up then names what the downstream made, as one settled by its own answer does. Seen in
// the network-fault run: refunds found by the look-up before sending had no reference.
func TestFoundReference(t *testing.T) {
	byList := &catalog.Tool{HTTP: catalog.HTTPSpec{ResultReference: "/id"}, Reconcile: &catalog.ReconcileSpec{Found: "/data/0/id"}}
	assert.Equal(t, "re_7", foundReference(byList, []byte(`"re_7"`)))
	assert.Equal(t, "42", foundReference(byList, []byte(`42`)))
	assert.Empty(t, foundReference(byList, []byte(`{"other":1}`)))
	whole := &catalog.Tool{HTTP: catalog.HTTPSpec{ResultReference: "/id"}, Reconcile: &catalog.ReconcileSpec{}}
	assert.Equal(t, "R-1", foundReference(whole, []byte(`{"id":"R-1"}`)))
	assert.Empty(t, foundReference(whole, []byte(`"R-1"`)), "without reconcile.found the answer is the whole result")
}
