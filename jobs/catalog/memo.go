package catalog

import "sync"

// paramsMemo remembers canonical params that passed a tool's schema. A loaded catalogue never
// changes, so a remembered answer is exactly the one validating again would give; the retries
// of one call, the common case this gateway exists for, skip decoding and validation.
// Bounded: params longer than memoMaxBytes are not remembered, and a full memo starts afresh.
type paramsMemo struct {
	mu    sync.RWMutex
	valid map[string]struct{}
}

const (
	memoMaxEntries = 4096
	memoMaxBytes   = 2048
)

func newParamsMemo() *paramsMemo { return &paramsMemo{valid: map[string]struct{}{}} }

func (m *paramsMemo) has(params []byte) bool {
	if m == nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.valid[string(params)] // the conversion in a map index does not allocate
	return ok
}

func (m *paramsMemo) add(params []byte) {
	if m == nil || len(params) > memoMaxBytes {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.valid) >= memoMaxEntries {
		clear(m.valid)
	}
	m.valid[string(params)] = struct{}{}
}
