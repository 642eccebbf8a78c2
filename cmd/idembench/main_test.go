package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchRuns drives every scenario briefly: the numbers are not checked (timing belongs to
// benchmarks), the outcome is — no errors, and one side effect for the storm. Three seconds a
// scenario: a loaded machine has been seen to finish no new operation within one.
func TestBenchRuns(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"--duration", "3s", "--concurrency", "4", "--storm", "50", "--json"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	var report struct {
		Results []result `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &report))
	require.Len(t, report.Results, 4)
	for _, r := range report.Results {
		require.Zero(t, r.Errors, r.Name)
		require.Positive(t, r.Requests, r.Name)
	}
	require.Equal(t, "side effects: 1", report.Results[3].Note)
}

// TestGrowthCurve: the growth scenario runs exactly the operations it is given, and reports one
// row per window and one for them all.
func TestGrowthCurve(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"--only", "growth", "--growth", "60", "--window", "20", "--concurrency", "4", "--json"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	var report struct {
		Results []result `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &report))
	require.Len(t, report.Results, 4)
	for _, r := range report.Results[:3] {
		require.EqualValues(t, 20, r.Requests, r.Name)
		require.Positive(t, r.PerSecond, r.Name)
	}
	all := report.Results[3]
	require.EqualValues(t, 60, all.Requests)
	require.Zero(t, all.Errors)
	require.Contains(t, all.Note, "all ÷ first 20")
}
