package jobs

import (
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// PendingGrace is how long a PENDING operation may be overdue before it counts as unresolved
// beyond its window: the dispatcher polls every fraction of a second, so a minute means no
// worker is running.
const PendingGrace = time.Minute

// Windows are the catalogue's limits on unresolved states, for the ledger's overdue query
// (the console's dashboard and the unresolved-beyond-window gauge): an UNKNOWN operation is
// overdue once its tool's escalate_after has passed.
func Windows(cat *catalog.Catalog) models.Windows {
	w := models.Windows{UnknownAfter: map[string]time.Duration{}, UnknownDefault: catalog.DefaultEscalateAfter, PendingGrace: PendingGrace}
	for _, t := range cat.Tools() {
		w.UnknownAfter[t.Name] = t.Review.EscalateAfter
	}
	return w
}
