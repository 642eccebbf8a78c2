package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckCanonicalRemembersWhatPassed: params that passed are answered from the memo, with
// the answer validation gives; params that failed, or are too long to keep, are checked each
// time.
func TestCheckCanonicalRemembersWhatPassed(t *testing.T) {
	tl := paramsTool(t)
	valid := []byte(`{"customer":"ada","items":[{"qty":1,"sku":"A"}]}`)
	invalid := []byte(`{"customer":"","items":[]}`)

	errs, err := tl.CheckCanonical(valid)
	require.NoError(t, err)
	assert.Empty(t, errs)
	assert.True(t, tl.memo.has(valid), "remembered after passing")
	errs, err = tl.CheckCanonical(valid)
	require.NoError(t, err)
	assert.NotNil(t, errs)
	assert.Empty(t, errs, "answered from the memo as validation answers")

	for range 2 {
		errs, err = tl.CheckCanonical(invalid)
		require.NoError(t, err)
		assert.Equal(t, tl.ValidateParams(decode(t, string(invalid))), errs, "failures are never remembered")
	}
	assert.False(t, tl.memo.has(invalid))

	long := []byte(`{"customer":"ada","items":[{"qty":1,"sku":"A"}],"note":"` + strings.Repeat("x", memoMaxBytes) + `"}`)
	errs, err = tl.CheckCanonical(long)
	require.NoError(t, err)
	assert.Empty(t, errs)
	assert.False(t, tl.memo.has(long), "too long to keep")

	_, err = tl.CheckCanonical([]byte(`{"customer":`))
	assert.Error(t, err, "not JSON at all")

	// A Tool built by hand has no memo and still checks.
	hand := &Tool{Name: "x", Schema: tl.Schema}
	errs, err = hand.CheckCanonical(invalid)
	require.NoError(t, err)
	assert.NotEmpty(t, errs)
}

// TestParamsMemoStaysBounded: a full memo starts afresh instead of growing.
func TestParamsMemoStaysBounded(t *testing.T) {
	m := newParamsMemo()
	for i := range memoMaxEntries + 10 {
		m.add([]byte(`{"n":` + strings.Repeat("1", 1+i%7) + `,"i":"` + string(rune('a'+i%26)) + strings.Repeat("z", i/26) + `"}`))
	}
	assert.LessOrEqual(t, len(m.valid), memoMaxEntries)
	assert.NotEmpty(t, m.valid)
}
