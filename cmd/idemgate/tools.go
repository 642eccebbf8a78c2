package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/toolsimport"
)

const toolsUsage = "usage: idemgate tools import --openapi FILE [--operations ID,ID] [--connection NAME] [--idempotency-header NAME]" +
	" | --mcp-command CMD [--name NAME] | --mcp-url URL [--connection NAME] [--name NAME]"

// tools runs `idemgate tools import` (docs/MCP.md, docs/CLI.md): it prints a tools file for a person to
// review, made from an OpenAPI document or an MCP server's tools, and writes no file itself.
func (env *environment) tools(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(toolsUsage)
	}
	if args[0] == "import" {
		return env.toolsImport(ctx, args[1:])
	}
	return fmt.Errorf("unknown tools command %q; %s", args[0], toolsUsage)
}

func (env *environment) toolsImport(ctx context.Context, args []string) error {
	fs := newFlagSet("tools import", env.stderr)
	openapi := fs.String("openapi", "", "an OpenAPI 3 document (JSON or YAML): one tool per operation")
	operations := fs.String("operations", "", "with --openapi: only these operationIds, comma-separated")
	mcpCommand := fs.String("mcp-command", "", "the command line that starts an MCP server (stdio)")
	mcpURL := fs.String("mcp-url", "", "an MCP server's Streamable HTTP endpoint")
	connection := fs.String("connection", "", "the connection the tools (or the MCP server at --mcp-url) go through")
	keyHeader := fs.String("idempotency-header", "", "with --openapi: the header of every write and idempotent tool that the API deduplicates by, where the document declares none (Stripe: Idempotency-Key)")
	name := fs.String("name", "", "with --mcp-command or --mcp-url: the server's name (default: from the package or host)")
	timeout := fs.Duration("timeout", time.Minute, "with --mcp-command or --mcp-url: how long starting the server and listing its tools may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	modes := 0
	for _, m := range []string{*openapi, *mcpCommand, *mcpURL} {
		if m != "" {
			modes++
		}
	}
	if modes != 1 || fs.NArg() > 0 {
		return errors.New(toolsUsage)
	}
	var f *toolsimport.File
	var err error
	if *openapi != "" {
		if *name != "" {
			return errors.New("--name is for an MCP server: an OpenAPI import names its tools after --connection")
		}
		f, err = importOpenAPI(*openapi, *operations, *connection, *keyHeader)
	} else {
		if *keyHeader != "" {
			return errors.New("--idempotency-header is for an OpenAPI import")
		}
		if *operations != "" {
			return errors.New("--operations is for --openapi")
		}
		f, err = importMCP(ctx, *mcpCommand, *mcpURL, *connection, *name, *timeout)
	}
	if err != nil {
		return err
	}
	return f.WriteYAML(env.stdout)
}

func importOpenAPI(file, operations, connection, keyHeader string) (*toolsimport.File, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tools import: %w", err)
	}
	var ids []string
	for _, id := range strings.Split(operations, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return toolsimport.OpenAPI(data, toolsimport.OpenAPIOptions{Operations: ids, Connection: connection, Source: filepath.Base(file),
		IdempotencyHeader: keyHeader})
}

func importMCP(ctx context.Context, command, url, connection, name string, timeout time.Duration) (*toolsimport.File, error) {
	opts := toolsimport.MCPOptions{URL: url, Connection: connection, Name: name}
	if command != "" {
		words, err := toolsimport.SplitCommand(command)
		if err != nil {
			return nil, fmt.Errorf("tools import: --mcp-command: %w", err)
		}
		opts.Command = words
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return toolsimport.MCP(ctx, opts)
}
