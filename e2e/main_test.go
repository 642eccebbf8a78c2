package e2e_test

import (
	"os"
	"testing"

	"github.com/idemgate/idemgate/internal/mcptest"
)

// TestMain lets this test binary be the fault MCP server the MCP tests start as the gateway's
// stdio child (internal/mcptest): re-executed with its state directory in the environment,
// it serves instead of testing. Re-executed as the import tests' measuring runner
// (peakrss_test.go), it runs one command and reports its peak memory.
func TestMain(m *testing.M) {
	serveMeasuredIfAsked()
	mcptest.ServeIfAsked()
	code := m.Run()
	if importBin.cleanup != nil {
		importBin.cleanup() // the binary the import tests built
	}
	os.Exit(code)
}
