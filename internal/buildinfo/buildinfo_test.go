package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRead(t *testing.T) {
	t.Parallel()
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	installed := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }

	got := read("", "", stamped)
	assert.Equal(t, "devel", got.Version, "a plain go build is no release")
	assert.Equal(t, "0123abcd", got.Revision)
	assert.True(t, got.Modified)
	assert.Equal(t, "v1.4.0", read("", "", installed).Version, "go install …@v1.4.0")
	assert.Equal(t, Info{Version: "devel", Revision: "unknown", GoVersion: got.GoVersion}, read("", "", none), "-buildvcs=false")
	linked := read("v1.5.0", "feedbeef", stamped)
	assert.Equal(t, "v1.5.0", linked.Version, "the linker's word comes first")
	assert.Equal(t, "feedbeef", linked.Revision)
	assert.NotEmpty(t, Read().GoVersion)
}
