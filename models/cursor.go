package models

import (
	"encoding/base64"
	"strings"

	"github.com/idemgate/idemgate/models/fingerprint"
)

// cursorTagLen is how many bytes of its tag a page cursor carries: 128 bits, past guessing.
const cursorTagLen = 16

// ListCursor returns the cursor of the page of tenant's operations after the one that ends at
// lastID (GET /v1/operations' next_cursor): the id and a tag under the ledger's key, each
// base64url, joined by ".". Only idemgate can make one, and one tenant's cursor is not
// another's.
func (l *Ledger) ListCursor(tenant, lastID string) string {
	tag := l.mustKey().Tag("list-cursor", tenant, lastID)
	return base64.RawURLEncoding.EncodeToString([]byte(lastID)) + "." + base64.RawURLEncoding.EncodeToString(tag[:cursorTagLen])
}

// ParseListCursor returns the operation id a cursor of ListCursor for tenant names, or an
// invalid-query error for any other text: a cursor idemgate did not issue, issued to another
// tenant, or altered.
func (l *Ledger) ParseListCursor(tenant, cursor string) (string, error) {
	bad := &Error{Code: CodeInvalid, Message: "cursor is not one this API returned"}
	idPart, tagPart, ok := strings.Cut(cursor, ".")
	if !ok {
		return "", bad
	}
	id, err := base64.RawURLEncoding.DecodeString(idPart)
	if err != nil || len(id) == 0 {
		return "", bad
	}
	tag, err := base64.RawURLEncoding.DecodeString(tagPart)
	if err != nil || len(tag) != cursorTagLen || !fingerprint.TagEqual(tag, l.mustKey().Tag("list-cursor", tenant, string(id))) {
		return "", bad
	}
	return string(id), nil
}
