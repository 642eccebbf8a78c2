package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/internal/buildinfo"
	"github.com/idemgate/idemgate/models"
)

// versionInfo is what `idemgate version` says: the build and the newest ledger schema this
// binary knows (a ledger migrated past it makes the binary refuse to start).
type versionInfo struct {
	buildinfo.Info
	Schema int `json:"schema_version"`
}

// version prints the release, the revision, the Go version and the newest ledger schema.
func (env *environment) version(_ context.Context, args []string) error {
	fs := newFlagSet("version", env.stderr)
	asJSON := fs.Bool("json", false, "print an object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version takes no arguments")
	}
	v := versionInfo{Info: buildinfo.Read(), Schema: models.SchemaVersion()}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		return enc.Encode(v)
	}
	modified := ""
	if v.Modified {
		modified = " (modified)"
	}
	_, err := fmt.Fprintf(env.stdout, "idemgate %s\nrevision %s%s\n%s\nledger schema %d\n", v.Version, v.Revision, modified, v.GoVersion, v.Schema)
	return err
}
