// Command openapigen writes the OpenAPI document of the agent API where it is served from
// (static/openapi.json, embedded) and where people read it (docs/openapi.json). It is run by
// `go generate ./static` from the static directory.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/idemgate/idemgate/internal/openapispec"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}

// run writes the document to every file named by -o (repeatable).
func run(args []string) error {
	var outs []string
	fs := flag.NewFlagSet("openapigen", flag.ContinueOnError)
	fs.Func("o", "write the document to this file (repeatable)", func(s string) error { outs = append(outs, s); return nil })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(outs) == 0 {
		return fmt.Errorf("name at least one output with -o")
	}
	doc, err := openapispec.Build()
	if err != nil {
		return err
	}
	for _, out := range outs {
		if err := os.WriteFile(out, doc, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	return nil
}
