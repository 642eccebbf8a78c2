package export_test

import (
	"io"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endless is an endless line: no newline ever comes.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// A file with a line longer than export.MaxLine is refused once that much is read, not read
// into memory whole (issue 47, finding 10: a 256 MiB line took 818 MB). The reader would give
// 256 MiB; the verifier stops at the bound.
func TestVerifyFileBoundsALine(t *testing.T) {
	r := &countingReader{r: io.LimitReader(endless{}, 256<<20)}
	_, err := export.VerifyFile(strings.NewReader(`{"id":"op_1"}`+"\n"), nil)
	require.Error(t, err, "two lines at least: a trailer and a signature")
	_, err = export.VerifyFile(r, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than 16 MiB")
	assert.Less(t, r.n, int64(export.MaxLine+(1<<20)), "stopped at the bound, not at the end of the line")
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
