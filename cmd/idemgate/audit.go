package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
)

const auditUsage = `usage: idemgate audit verify [--export FILE [--key KEYFILE] [--ledger] [--allow-unsigned]]
       idemgate audit export [--from T] [--to T]
       idemgate audit key generate | rotate | list [--pem KEY_ID]`

// audit runs `idemgate audit verify|export|key` (docs/AUDIT.md).
func (env *environment) audit(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", auditUsage)
	}
	switch args[0] {
	case "verify":
		return env.auditVerify(ctx, args[1:])
	case "export":
		return env.auditExport(ctx, args[1:])
	case "key":
		return env.auditKey(ctx, args[1:])
	}
	return fmt.Errorf("unknown audit command %q\n%s", args[0], auditUsage)
}

// auditVerify checks the ledger's chain, or an export file offline.
func (env *environment) auditVerify(ctx context.Context, args []string) error {
	fs := newFlagSet("audit verify", env.stderr)
	file := fs.String("export", "", "check this export file (NDJSON, CSV or an audit log export) offline instead of the ledger")
	keyFile := fs.String("key", "", "with --export: the audit keys (idemgate audit key list, or GET /audit/keys) that must have signed it")
	live := fs.Bool("ledger", false, "with --export: also check that the export's audit entry is in the ledger's chain")
	unsigned := fs.Bool("allow-unsigned", false, "with --export and neither --key nor --ledger: check only that the file is consistent, and exit 0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || ((*live || *keyFile != "" || *unsigned) && *file == "") {
		return fmt.Errorf("%s", auditUsage)
	}
	if *file != "" {
		if err := env.verifyExport(ctx, *file, *keyFile, *live); err != nil {
			return err
		}
		if *keyFile == "" && !*live && !*unsigned {
			// Consistent is not genuine: whoever rewrites a file can make it consistent.
			return fmt.Errorf("%s is consistent, but nothing was verified cryptographically: give --key KEYFILE (or --ledger), or --allow-unsigned to accept a consistency check alone", *file)
		}
		return nil
	}
	_, closeDB, cp, err := env.verifiedChain(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintf(env.stdout, "audit chain ok: %d entries, head %s\n", cp.Seq, cp.Hash)
	if cp.Signature != "" {
		// The signed checkpoint, to keep outside the database: docs/AUDIT.md verifies it.
		fmt.Fprintf(env.stdout, "checkpoint %s\nsignature %s\n", cp.Statement(), cp.Signature)
	}
	return nil
}

// verifiedChain opens the ledger and verifies its whole audit chain. The caller closes the
// ledger; on an error it is already closed. The data keys open the signing key that signs the
// new checkpoint.
func (env *environment) verifiedChain(ctx context.Context) (*models.Ledger, func(), models.AuditCheckpoint, error) {
	l, closeDB, err := env.openSealedLedger(ctx)
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

// verifyExport checks an export file without a database: with keyFile, that the audit signing
// key signed it, which is what proves it genuine offline. When live, it also finds the
// export's audit entry in the ledger's verified chain.
func (env *environment) verifyExport(ctx context.Context, path, keyFile string, live bool) error {
	var keys *models.AuditKeySet
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return fmt.Errorf("read the key file: %w", err)
		}
		set, err := models.ParseAuditKeySet(b)
		if err != nil {
			return fmt.Errorf("%s: %w", keyFile, err)
		}
		keys = &set
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open export: %w", err)
	}
	defer f.Close()
	v, err := export.VerifyFile(f, keys)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	what := fmt.Sprintf("%s, %d operations, %d events", v.Format, v.Operations, v.Events)
	if v.AuditLog {
		what = fmt.Sprintf("audit log, %d entries", v.Entries)
	}
	fmt.Fprintf(env.stdout, "export ok: %s, sha256 %s, audit entry %d %s\n", what, v.SHA256, v.Entry.Seq, v.Entry.Hash)
	if v.KeyID != "" {
		fmt.Fprintf(env.stdout, "signed by audit key %s at %s\n", v.KeyID, v.SignedAt().UTC().Format(time.RFC3339Nano))
	} else {
		fmt.Fprintln(env.stderr, "the signature was not checked (give --key KEYFILE): the file is consistent, but whoever rewrites it can make it so")
	}
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

// auditExport writes the audit log itself to standard output, signed like every export, and
// anchors it in the chain with actor "cli".
func (env *environment) auditExport(ctx context.Context, args []string) error {
	fs := newFlagSet("audit export", env.stderr)
	from := fs.String("from", "", "only entries made at or after this time (RFC 3339, or YYYY-MM-DD in UTC)")
	to := fs.String("to", "", "only entries made before this time (RFC 3339), or on or before this day (YYYY-MM-DD in UTC)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s", auditUsage)
	}
	var req export.AuditRequest
	var err error
	if req.From, err = parseWhen("from", *from, false); err != nil {
		return err
	}
	if req.To, err = parseWhen("to", *to, true); err != nil {
		return err
	}
	req.Actor = models.ActorCLI
	l, closeDB, err := env.openSealedLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	x := export.Exporter{Ledger: l}
	res, err := x.WriteAuditLog(ctx, env.stdout, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "exported %d audit entries (sha256 %s); audit entry %d %s\n", res.Entries, res.SHA256, res.Entry.Seq, res.Entry.Hash)
	return nil
}

// auditKey runs `idemgate audit key generate|rotate|list`.
func (env *environment) auditKey(ctx context.Context, args []string) error {
	fs := newFlagSet("audit key", env.stderr)
	pemOf := fs.String("pem", "", "with list: print only this key's public half, as PEM (for openssl)")
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if sub == "" || fs.NArg() > 0 || (*pemOf != "" && sub != "list") {
		return fmt.Errorf("%s", auditUsage)
	}
	args = []string{sub}
	l, closeDB, err := env.openSealedLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	switch args[0] {
	case "generate", "rotate":
		made := l.GenerateAuditKey
		if args[0] == "rotate" {
			made = l.RotateAuditKey
		}
		k, err := made(ctx, cli)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "audit signing key %s (%s), valid from %s\n", k.KeyID, k.Algorithm, k.NotBefore.Format(time.RFC3339Nano))
		return nil
	case "list":
		set, err := l.AuditKeys(ctx)
		if err != nil {
			return err
		}
		if *pemOf != "" {
			for _, k := range set.Keys {
				if k.KeyID == *pemOf {
					_, err := fmt.Fprint(env.stdout, k.PEM)
					return err
				}
			}
			return fmt.Errorf("no audit key %q", *pemOf)
		}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(set)
	}
	return fmt.Errorf("unknown audit key command %q\n%s", args[0], auditUsage)
}
