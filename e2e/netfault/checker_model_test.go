package netfault_test

import (
	"net/http"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// The checker's model catches what it must and lets through what it may (it needs no root).
func TestCheckerModel(t *testing.T) {
	succeeded := `{"id":"op_1","state":"SUCCEEDED","result":{"id":"re_1"},"error":null,"downstream_ref":"re_1"}`
	op := func(client int, from, to int64, status int, body string) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: call{Key: "k"}, Call: from, Return: to,
			Output: answerOf(status, []byte(body), nil)}
	}
	noAnswer := porcupine.Operation{Input: call{Key: "k"}, Call: 5, Return: 6, Output: answer{Err: "timeout"}}
	cases := []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"pending, lost, 503, then the result twice", true, []porcupine.Operation{
			op(0, 0, 1, http.StatusAccepted, `{"id":"op_1","state":"PENDING","result":null}`),
			noAnswer,
			op(0, 7, 8, http.StatusServiceUnavailable, `{"type":"/problems/ledger-unavailable"}`),
			op(0, 9, 10, http.StatusCreated, succeeded),
			op(1, 11, 12, http.StatusOK, succeeded),
		}},
		{"two results", false, []porcupine.Operation{
			op(0, 0, 1, http.StatusCreated, succeeded),
			op(0, 2, 3, http.StatusOK, `{"id":"op_1","state":"SUCCEEDED","result":{"id":"re_2"},"downstream_ref":"re_2"}`),
		}},
		{"succeeded, then failed", false, []porcupine.Operation{
			op(0, 0, 1, http.StatusCreated, succeeded),
			op(0, 2, 3, http.StatusOK, `{"id":"op_1","state":"FAILED_FINAL","result":null,"error":{"class":"retries_exhausted"}}`),
		}},
		{"two operations for one key", false, []porcupine.Operation{
			op(0, 0, 1, http.StatusAccepted, `{"id":"op_1","state":"PENDING"}`),
			op(0, 2, 3, http.StatusAccepted, `{"id":"op_2","state":"PENDING"}`),
		}},
		{"in progress after the result", false, []porcupine.Operation{
			op(0, 0, 1, http.StatusCreated, succeeded),
			op(1, 2, 3, http.StatusConflict, `{"type":"/problems/operation-in-progress","operation_id":"op_1"}`),
		}},
		{"in progress while the result was being answered", true, []porcupine.Operation{
			op(0, 0, 4, http.StatusCreated, succeeded),
			op(1, 2, 3, http.StatusConflict, `{"type":"/problems/operation-in-progress","operation_id":"op_1"}`),
		}},
		{"the same result, keys in another order", true, []porcupine.Operation{
			op(0, 0, 1, http.StatusCreated, `{"id":"op_1","state":"SUCCEEDED","result":{"a":1,"b":2},"downstream_ref":"x"}`),
			op(0, 2, 3, http.StatusOK, `{"result":{"b":2,"a":1},"downstream_ref":"x","state":"SUCCEEDED","id":"op_1"}`),
		}},
	}
	for _, c := range cases {
		assert.Equal(t, c.ok, porcupine.CheckOperations(perKey, c.ops), c.name)
	}
}
