package fingerprint

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
)

// typicalParams is a typical params object of about 300 bytes.
var typicalParams = []byte(`{"customer_id": "cus_9f8e7d6c5b4a", "amount": 1999, "currency": "EUR",
 "reason": "Duplicate charge on invoice INV-2026-00042",
 "metadata": {"order_id": "ord_123456", "line_items": [{"sku": "SKU-1", "qty": 2, "price": 9.99},
 {"sku": "SKU-2", "qty": 1, "price": 0.01}], "refund_all": false, "note": null}, "notify": true}`)

func BenchmarkNormalize(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalParams)))
	for b.Loop() {
		if _, err := Normalize(typicalParams); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOf(b *testing.B) {
	canon, err := Normalize(typicalParams)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(canon)))
	for b.Loop() {
		_ = testKey.Of("payments.refund", canon)
	}
}

func BenchmarkFingerprint(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalParams)))
	for b.Loop() {
		if _, err := testKey.Fingerprint("payments.refund", typicalParams); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJCSTransform is the same input through github.com/gowebpki/jcs,
// for comparison.
func BenchmarkJCSTransform(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalParams)))
	for b.Loop() {
		if _, err := jcs.Transform(typicalParams); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONTextCanonicalize is the same input through go-json-experiment's jsontext
// (RFC 8785 canonical form, duplicate names and invalid UTF-8 refused), for comparison: it
// does not refuse numbers a double cannot hold exactly, which Normalize must (I-JSON), so it
// could not replace Normalize alone.
func BenchmarkJSONTextCanonicalize(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalParams)))
	for b.Loop() {
		v := jsontext.Value(bytes.Clone(typicalParams))
		if err := v.Canonicalize(); err != nil {
			b.Fatal(err)
		}
	}
}
