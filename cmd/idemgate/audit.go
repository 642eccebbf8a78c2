package main

import (
	"context"
	"fmt"
	"os"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
)

const auditUsage = "usage: idemgate audit verify [--export FILE [--ledger]]"

// audit runs `idemgate audit verify`: the ledger's chain, or an export file offline.
func (env *environment) audit(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return fmt.Errorf("%s", auditUsage)
	}
	fs := newFlagSet("audit verify", env.stderr)
	file := fs.String("export", "", "check this export file (NDJSON or CSV) offline instead of the ledger")
	live := fs.Bool("ledger", false, "with --export: also check that the export's audit entry is in the ledger's chain")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*live && *file == "") {
		return fmt.Errorf("%s", auditUsage)
	}
	if *file != "" {
		return env.verifyExport(ctx, *file, *live)
	}
	_, closeDB, cp, err := env.verifiedChain(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintf(env.stdout, "audit chain ok: %d entries, head %s\n", cp.Seq, cp.Hash)
	return nil
}

// verifiedChain opens the ledger and verifies its whole audit chain. The caller closes the
// ledger; on an error it is already closed.
func (env *environment) verifiedChain(ctx context.Context) (*models.Ledger, func(), models.AuditCheckpoint, error) {
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return nil, nil, models.AuditCheckpoint{}, err
	}
	cp, err := l.VerifyAuditChain(ctx)
	if err != nil {
		closeDB()
		return nil, nil, models.AuditCheckpoint{}, err
	}
	return l, closeDB, cp, nil
}

// verifyExport checks an export file without a database, then, when live, finds its audit
// entry in the ledger's verified chain: only that proves the entry was not forged with the file.
func (env *environment) verifyExport(ctx context.Context, path string, live bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open export: %w", err)
	}
	defer f.Close()
	v, err := export.VerifyFile(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(env.stdout, "export ok: %s, %d operations, %d events, sha256 %s, audit entry %d %s\n",
		v.Format, v.Operations, v.Events, v.SHA256, v.Entry.Seq, v.Entry.Hash)
	if !live {
		return nil
	}
	l, closeDB, cp, err := env.verifiedChain(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	e, err := l.AuditEntryAt(ctx, v.Entry.Seq)
	if models.ErrorCode(err) == models.CodeNotFound {
		return fmt.Errorf("%s: its audit entry %d is not in the ledger's chain", path, v.Entry.Seq)
	}
	if err != nil {
		return err
	}
	if e.Hash != v.Entry.Hash {
		return fmt.Errorf("%s: its audit entry %d has hash %s, the ledger's entry %d has %s: the export's entry was not recorded",
			path, v.Entry.Seq, v.Entry.Hash, e.Seq, e.Hash)
	}
	fmt.Fprintf(env.stdout, "audit entry %d is in the ledger's chain (verified up to entry %d, head %s)\n", e.Seq, cp.Seq, cp.Hash)
	return nil
}
