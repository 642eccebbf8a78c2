package toolsimport

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/idemgate/idemgate/jobs/catalog"
	"golang.org/x/net/publicsuffix"
)

// The names the tools file takes (docs/TOOLS.md, docs/MCP.md).
var (
	toolNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	serverNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	identRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// snakeCase spells an operationId the way tool names are written: words split where the case
// changes ("PostRefunds" → "post_refunds", "getHTTPStatus" → "get_http_status") and at
// anything that is not a letter or digit, lower case, joined by "_".
func snakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	pendingSep := false
	for i, r := range rs {
		if !isASCIIAlnum(r) {
			pendingSep = b.Len() > 0
			continue
		}
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			// A word starts at an upper-case letter after a lower-case one or a digit
			// ("refundsCreate", "v1Refunds"), and at the last capital of an acronym
			// followed by lower case ("HTTPStatus": "http", "status").
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				pendingSep = b.Len() > 0
			}
		}
		if pendingSep {
			b.WriteByte('_')
			pendingSep = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func isASCIIAlnum(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// toolName is prefix + "." + the operation's name in snake case, shortened when it would not
// fit: the catalog refuses a name over 64 characters, or one whose function name (each "."
// written "__", as OpenAI and Anthropic see it) is over catalog.MaxFunctionNameLen. A shortened
// name ends in a hash of the whole one, so two long operationIds stay two names.
func toolName(prefix, operation string) string {
	full := prefix + "." + snakeCase(operation)
	if fits(full) {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	suffix := "_" + hex.EncodeToString(sum[:])[:6]
	name := full
	for len(name) > 0 && !fits(name+suffix) {
		name = name[:len(name)-1]
	}
	return strings.TrimRight(name, "_.-") + suffix
}

func fits(name string) bool {
	return toolNameRE.MatchString(name) && len(strings.ReplaceAll(name, ".", "__")) <= catalog.MaxFunctionNameLen
}

// paramIdent is a param's name as a URL template can refer to it ({{.Params.name}} takes Go
// identifiers only): the name itself when it is one, else its snake case ("customer-id" →
// "customer_id"), with a leading "p_" when that would start with a digit.
func paramIdent(name string) string {
	if identRE.MatchString(name) {
		return name
	}
	s := snakeCase(name)
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "p_" + s
	}
	return s
}

// serverName sanitises s into a server or connection name, [a-z0-9][a-z0-9_-]{0,31}; "" when
// nothing usable is left.
func serverName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)), r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(collapse(b.String(), '-'), "-_")
	if len(out) > 32 {
		out = strings.TrimRight(out[:32], "-_")
	}
	if !serverNameRE.MatchString(out) {
		return ""
	}
	return out
}

// collapse replaces runs of sep with one.
func collapse(s string, sep byte) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == sep && i > 0 && s[i-1] == sep {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// runners are programs that start a server named by a later argument (npx PACKAGE, uvx
// PACKAGE, node FILE, docker run IMAGE); its name is that argument's, not the runner's.
var runners = []string{"npx", "bunx", "pnpx", "uvx", "uv", "pipx", "node", "deno", "bun", "python", "python3",
	"docker", "podman", "npm", "pnpm", "yarn", "go"}

// runnerWords are the sub-commands runners take before the server ("uv run", "docker run").
var runnerWords = []string{"run", "exec", "dlx", "x", "tool"}

// nameFromCommand derives a server name from the command that starts it:
// "npx -y @modelcontextprotocol/server-memory" → "memory", "uvx mcp-server-fetch" → "fetch".
func nameFromCommand(args []string) string {
	pkg := args[0]
	if slices.Contains(runners, strings.TrimSuffix(path.Base(pkg), ".exe")) {
		for _, a := range args[1:] {
			// The first word that is no flag, flag value (KEY=VALUE) or runner sub-command.
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && !slices.Contains(runnerWords, a) {
				pkg = a
				break
			}
		}
	}
	return nameFromPackage(pkg)
}

// nameFromPackage is the server's own name in a package, image or file name: without scope,
// version, directory, extension and the words every MCP server's name has.
func nameFromPackage(pkg string) string {
	if i := strings.LastIndex(pkg, "@"); i > 0 {
		pkg = pkg[:i] // "@scope/name@1.2.3", "name@latest"
	}
	pkg, _, _ = strings.Cut(pkg, "==") // "name==1.2.3"
	if i := strings.LastIndex(pkg, ":"); i > strings.LastIndex(pkg, "/") {
		pkg = pkg[:i] // an image's tag: "mcp/fetch:latest"
	}
	parts := strings.FieldsFunc(pkg, func(r rune) bool { return r == '/' || r == '\\' })
	for len(parts) > 1 {
		last := strings.ToLower(strings.TrimSuffix(parts[len(parts)-1], path.Ext(parts[len(parts)-1])))
		// dist/index.js says nothing: the name is further up.
		if !slices.Contains([]string{"index", "main", "server", "cli", "dist", "build", "lib", "src", "bin", "out"}, last) {
			break
		}
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 {
		return ""
	}
	name := strings.ToLower(parts[len(parts)-1])
	name = strings.TrimSuffix(name, path.Ext(name))
	for _, p := range []string{"mcp-server-", "mcp_server_", "server-", "mcp-"} {
		name = strings.TrimPrefix(name, p)
	}
	for _, s := range []string{"-mcp-server", "_mcp_server", "-mcp", "_mcp", "-server"} {
		name = strings.TrimSuffix(name, s)
	}
	return serverName(name)
}

// nameFromURL derives a server name from its URL's host: the name under the public suffix
// ("https://mcp.notion.com/mcp" → "notion"), or the whole host for an address or a name
// without a suffix ("127.0.0.1" → "127-0-0-1", "localhost").
func nameFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if net.ParseIP(host) != nil || !strings.Contains(host, ".") {
		return serverName(host)
	}
	if site, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		first, _, _ := strings.Cut(site, ".")
		return serverName(first)
	}
	return serverName(host)
}
