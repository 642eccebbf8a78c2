package datakey

import (
	"encoding/base64"
	"strings"
	"testing"
)

func mustParse(t *testing.T, current, old string) *Keyring {
	t.Helper()
	kr, err := Parse(current, old)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return kr
}

func TestSealOpen(t *testing.T) {
	a, b := Generate(), Generate()
	kr := mustParse(t, a, "")
	secret := []byte(`{"card_number":"4242424242424242"}`)
	sealed := kr.Seal(secret, []byte("op_1"))
	if strings.Contains(sealed, "4242") || !strings.HasPrefix(sealed, "v1:"+kr.ID()+":") {
		t.Fatalf("sealed value %q", sealed)
	}
	if again := kr.Seal(secret, []byte("op_1")); again == sealed {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	got, err := kr.Open(sealed, []byte("op_1"))
	if err != nil || string(got) != string(secret) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := kr.Open(sealed, []byte("op_2")); err == nil {
		t.Error("a value opened bound to another operation")
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if _, err := kr.Open(tampered, []byte("op_1")); err == nil {
		t.Error("a tampered value opened")
	}

	// Rotation: b is current, a still opens what it sealed.
	rotated := mustParse(t, b, a)
	if rotated.Current(sealed) || !kr.Current(sealed) {
		t.Error("Current does not tell the keys apart")
	}
	if got, err := rotated.Open(sealed, []byte("op_1")); err != nil || string(got) != string(secret) {
		t.Fatalf("old key: Open = %q, %v", got, err)
	}
	// Without the old key, the value does not open, and the error names the key it needs.
	_, err = mustParse(t, b, "").Open(sealed, []byte("op_1"))
	if err == nil || !strings.Contains(err.Error(), kr.ID()) {
		t.Errorf("without the old key: %v", err)
	}
}

func TestParse(t *testing.T) {
	if kr, err := Parse("", ""); kr != nil || err != nil {
		t.Errorf("no keys: %v, %v", kr, err)
	}
	if _, err := Parse("", Generate()); err == nil {
		t.Error("old keys without a current one accepted")
	}
	if _, err := Parse(base64.StdEncoding.EncodeToString(make([]byte, 16)), ""); err == nil {
		t.Error("a 16-byte key accepted")
	}
	if _, err := Parse("not base64!", ""); err == nil {
		t.Error("garbage accepted")
	}
	raw := make([]byte, Size)
	raw[0] = 0xfb // encodes with "+" or "-"
	std, url := base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw)
	a, b := mustParse(t, std, ""), mustParse(t, url, "")
	if a.ID() != b.ID() {
		t.Error("the two base64 alphabets read as different keys")
	}
	kr := mustParse(t, Generate(), Generate()+", "+Generate())
	if len(kr.byID) != 3 {
		t.Errorf("keyring holds %d keys, want 3", len(kr.byID))
	}
}
