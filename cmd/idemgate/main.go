// Command idemgate is the execution gateway: `idemgate serve` runs the API and the recovery
// jobs; the other subcommands administer the ledger (docs/CLI.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the process's exit status after run returned err, which it reports on stderr:
// 0 for none, and for -h (the flag set printed its flags: help was asked for, nothing failed);
// 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "idemgate:", err)
	return 1
}

// flagSets are the commands that have flags, by the name of their flag set (newFlagSet's):
// `idemgate help` prints each one's flags from the flag set itself. TestHelpListsEveryFlagSet
// keeps the list equal to the flag sets the source makes.
var flagSets = []string{"apikey create", "audit export", "audit key", "audit verify", "budget list", "budget set",
	"budget unset", "datakey rotate", "export", "policy explain", "policy test", "secret delete", "secret list", "secret set", "serve", "tools import", "user create", "version",
	"webhook create", "webhook list"}

// help prints the summary, then every flag of every command, as its flag set describes it
// (the same text as `idemgate CMD -h`), so the two cannot disagree.
func (env *environment) help(ctx context.Context) error {
	fmt.Fprint(env.stdout, usage)
	fmt.Fprint(env.stdout, "\nFlags (also `idemgate COMMAND -h`; serve's are worker's too; docs/CLI.md says more):\n")
	for _, name := range flagSets {
		var flags strings.Builder
		args := append(strings.Fields(name), "-h")
		if name == "audit key" {
			args = []string{"audit", "key", "list", "-h"}
		}
		if err := run(ctx, args, env.getenv, strings.NewReader(""), io.Discard, &flags); !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("help: idemgate %s -h: %v", name, err)
		}
		text := flags.String()
		if _, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(text, "Usage of ") {
			text = rest
		}
		fmt.Fprintf(env.stdout, "\nidemgate %s\n%s", name, text)
	}
	return nil
}

const usage = `idemgate — an execution gateway that makes agents' state-changing tool calls safe to retry.

Usage:
  idemgate serve [--demo [--demo-force]] [--addr ADDR] [--tools FILE] [--metrics-addr ADDR]
                 [--trust-proxy RANGES] [--allowed-origin ORIGINS] [--webhook-retention D]
                 [--approval-warning D]
                 [--oidc-issuer URL --oidc-client-id ID --oidc-redirect-url URL [--oidc-name N]
                  [--oidc-role-claim C] [--oidc-tenants-claim C]]
                                                          run the API, console and recovery jobs
  idemgate worker [--tools FILE] [--metrics-addr ADDR] [--webhook-retention D] [--approval-warning D]
                                                          run the recovery jobs only
  idemgate migrate                                        apply pending schema migrations
  idemgate tenant create NAME
  idemgate apikey create --tenant NAME --principal NAME [--tools a,b|*]
  idemgate apikey revoke PREFIX
  idemgate export --format csv|ndjson [--tenant T] [--from T] [--to T] [--state S] [--tool N]
                                                          operation histories to standard output
  idemgate audit verify [--export FILE [--key KEYFILE] [--ledger]]
                                                          check the audit chain, or an export file
                                                          (offline; signed by a key of KEYFILE)
  idemgate audit export [--from T] [--to T]               the audit log itself to standard output, signed
  idemgate audit key generate | rotate                    make the Ed25519 key that signs exports and
                                                          checkpoints (sealed under IDEMGATE_DATA_KEY)
  idemgate audit key list [--pem KEY_ID]                  the public keys with their validity (a KEYFILE)
  idemgate user create --email E --role reviewer|auditor|admin [--tenants a,b]
                                                          password: first line of standard input
  idemgate webhook create --tenant T --url U --events a,b [--allow-private]
                                                          subscribe a URL; prints the signing secret once
  idemgate webhook list [--tenant T] | webhook delete ID
  idemgate secret set --tenant T NAME                     a tenant's secret for its connections' {tenant: NAME}
                                                          (value: first line of standard input; needs IDEMGATE_DATA_KEY)
  idemgate secret list [--tenant T] | secret delete --tenant T NAME
                                                          names and when each was set, never values
  idemgate budget set --tenant T NAME LIMIT | unset --tenant T NAME
                                                          a tenant's own limit of a budget of the tools file
  idemgate budget list [--tenant T] [--tools FILE]        each budget's limit per tenant and its usage now
  idemgate policy test [--tools FILE] CASES.yaml         decide each case of a file with the tools file's
                                                          policies and budgets; exit 1 if one differs
  idemgate policy explain [--tools FILE] --tool T --params JSON [--principal P]
                                                          every policy and budget that applies, and the decision
  idemgate tools import --openapi FILE [--operations ID,ID] [--connection NAME] [--idempotency-header NAME]
  idemgate tools import --mcp-command CMD | --mcp-url URL [--connection NAME] [--name NAME]
                                                          print a tools file to review, from an OpenAPI
                                                          document or an MCP server's tools (writes no file)
  idemgate version [--json]                               the release, revision, Go version and ledger schema
  idemgate datakey generate                               print a new data key for IDEMGATE_DATA_KEY
  idemgate datakey rotate [--tools FILE]                  seal every stored sensitive value under
                                                          IDEMGATE_DATA_KEY (old keys in IDEMGATE_DATA_KEYS_OLD)

Environment:
  IDEMGATE_DATABASE_URL  postgres://… or an SQLite file (default idemgate.db); a PostgreSQL
                         URL may name a primary and its standbys:
                         postgres://h1:5432,h2:5432/idemgate?target_session_attrs=read-write;
                         through PgBouncer (pool_mode = transaction) add
                         default_query_exec_mode=exec
  IDEMGATE_DATABASE_LISTEN_URL  a direct PostgreSQL URL (no transaction pooler) for the
                         LISTEN connection that wakes waiters on other replicas' operations
                         (default: IDEMGATE_DATABASE_URL, none when that one is pooled: poll)
  IDEMGATE_ADDR          listen address (default 127.0.0.1:8080)
  IDEMGATE_TOOLS         tools file (default: the built-in demo catalogue)
  IDEMGATE_DEMO=1        same as --demo
  IDEMGATE_DEMO_FORCE=1  same as --demo-force (allow --demo on PostgreSQL)
  IDEMGATE_METRICS_ADDR  same as --metrics-addr: where /metrics listens (default: not served)
  IDEMGATE_SESSION_KEY   secret (32+ characters) for console session cookies (default: one
                         generated and kept in the database)
  IDEMGATE_TRUST_PROXY   same as serve --trust-proxy: the proxies' address ranges,
                         e.g. 10.0.0.0/8,192.168.0.0/16 (default: none trusted)
  IDEMGATE_ALLOWED_ORIGINS
                         same as serve --allowed-origin: sites besides the gateway's own whose
                         browser pages may call /mcp (default: none)
  IDEMGATE_OIDC_ISSUER, IDEMGATE_OIDC_CLIENT_ID, IDEMGATE_OIDC_REDIRECT_URL, IDEMGATE_OIDC_NAME,
  IDEMGATE_OIDC_ROLE_CLAIM, IDEMGATE_OIDC_TENANTS_CLAIM
                         same as the serve --oidc-… flags: single sign-on beside passwords
  IDEMGATE_OIDC_CLIENT_SECRET
                         the client's secret at the provider (only from the environment)
  IDEMGATE_DATA_KEY      base64 of 32 random bytes: seals sensitive params at rest (AES-256-GCM)
  IDEMGATE_DATA_KEYS_OLD earlier data keys, comma-separated: still open what they sealed
  IDEMGATE_LOG_LEVEL     debug, info, warn or error (default info)
`

// run is the whole program, with its environment passed in so tests can drive it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	env := &environment{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr,
		createsLedger: args[0] == "serve" || args[0] == "worker" || args[0] == "migrate"}
	switch args[0] {
	case "serve":
		return env.serve(ctx, args[1:], true)
	case "worker":
		return env.serve(ctx, args[1:], false)
	case "migrate":
		return env.migrate(ctx, args[1:])
	case "tenant":
		return env.tenant(ctx, args[1:])
	case "apikey":
		return env.apikey(ctx, args[1:])
	case "export":
		return env.export(ctx, args[1:])
	case "audit":
		return env.audit(ctx, args[1:])
	case "user":
		return env.user(ctx, args[1:])
	case "webhook":
		return env.webhook(ctx, args[1:])
	case "datakey":
		return env.datakey(ctx, args[1:])
	case "secret":
		return env.secret(ctx, args[1:])
	case "tools":
		return env.tools(ctx, args[1:])
	case "policy":
		return env.policy(ctx, args[1:])
	case "budget":
		return env.budget(ctx, args[1:])
	case "version":
		return env.version(ctx, args[1:])
	case "help", "-h", "--help":
		return env.help(ctx)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// environment is what every subcommand reads and writes.
type environment struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// createsLedger: the command may create an SQLite ledger that does not exist yet (serve,
	// worker, migrate); every other command refuses one (openDB).
	createsLedger bool
}
