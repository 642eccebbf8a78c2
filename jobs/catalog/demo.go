package catalog

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed demo.yaml
var demoYAML string

// demoPlaceholder in demo.yaml stands for the sandbox's base URL.
const demoPlaceholder = "{{SANDBOX}}"

// Demo returns the built-in demo catalogue, wired to the sandbox downstream served at
// sandboxBaseURL (e.g. "http://127.0.0.1:8080/sandbox"). The file is embedded and covered by
// tests, so Demo panics only when sandboxBaseURL is not an absolute http(s) URL, which is a
// programming error in the caller.
func Demo(sandboxBaseURL string) *Catalog {
	c, err := loadDemo(sandboxBaseURL)
	if err != nil {
		panic(err)
	}
	return c
}

func loadDemo(sandboxBaseURL string) (*Catalog, error) {
	base := strings.TrimRight(sandboxBaseURL, "/")
	if strings.Contains(base, "{{") {
		return nil, fmt.Errorf("demo catalogue: invalid sandbox URL %q", sandboxBaseURL)
	}
	c, err := Load([]byte(strings.ReplaceAll(demoYAML, demoPlaceholder, base)))
	if err != nil {
		return nil, fmt.Errorf("demo catalogue: %w", err)
	}
	return c, nil
}
