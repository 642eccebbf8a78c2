package export

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models"
)

// Verified describes an export that passed the offline check.
type Verified struct {
	Format Format
	// AuditLog is true for an export of the audit log itself (WriteAuditLog).
	AuditLog bool
	// Operations and Events are as the audit entry records them; for NDJSON they were also
	// counted in the file. Entries is the number of audit entries of an audit log export.
	Operations int64
	Events     int64
	Entries    int64
	SHA256     string
	// Entry is the export's audit entry, carried by the trailer. Whether it is part of the live
	// chain can only be told by the ledger (see models.Ledger.AuditEntryAt).
	Entry *models.AuditEntry
	// KeyID names the key whose signature was checked; "" when no key set was given.
	KeyID string
}

// Invalid is the answer for an export that fails the check: every problem found, in order.
type Invalid struct {
	Problems []string
}

func (e *Invalid) Error() string {
	return "export check failed: " + strings.Join(e.Problems, "; ")
}

// VerifyFile checks an export (NDJSON, CSV or an audit log export, told apart by its first
// line and its trailer) offline, without a database, reading it once in constant memory beyond
// its longest line: the SHA-256 of every line before the trailer must equal the trailer's
// export_sha256; the trailer's audit entry must recompute to its own hash, be the chain head
// the trailer names, and record the same digest, format and filter (and, for NDJSON, the
// number of operations and events counted in the file; for an audit log, its entries, whose
// hashes and links are recomputed); the trailer must be byte for byte what the exporter
// writes. Any edit, removal or addition of a line fails one of these and is reported as
// *Invalid.
//
// With keys, the last line must be the signature of the trailer line by the key the trailer
// names, made inside that key's validity: only that proves the file came from the ledger, as
// everything else can be recomputed by whoever rewrites the file. Without keys the signature
// is not checked (Verified.KeyID is "").
func VerifyFile(r io.Reader, keys *models.AuditKeySet) (*Verified, error) {
	s := fileScan{digest: sha256.New()}
	if err := s.read(bufio.NewReaderSize(r, 64<<10)); err != nil {
		return nil, err
	}
	if s.last == nil || s.trailer == nil {
		return nil, &Invalid{Problems: []string{"the file has no trailer and signature lines"}}
	}
	var t Trailer
	var sig Signature
	var err error
	if s.format == NDJSON {
		t, sig, err = parseNDJSONTrailer(s.trailer, s.last)
	} else {
		t, sig, err = parseCSVTrailer(s.trailer, s.last)
	}
	if err != nil {
		return nil, &Invalid{Problems: append(s.problems, fmt.Sprintf("trailer (lines %d and %d): %v", s.lines-1, s.lines, err))}
	}
	v := &Verified{Format: s.format, SHA256: hex.EncodeToString(s.digest.Sum(nil))}
	problems := append(s.problems, checkAnchor(&t, v, &s)...)
	if keys != nil {
		problems = append(problems, checkSignature(keys, &t, sig, s.trailer, v)...)
	}
	if len(problems) > 0 {
		return nil, &Invalid{Problems: problems}
	}
	return v, nil
}

// checkSignature checks the signature line against keys.
func checkSignature(keys *models.AuditKeySet, t *Trailer, sig Signature, trailer []byte, v *Verified) []string {
	if sig.Signature == "" {
		return []string{"the export is not signed (it was made while the ledger had no audit signing key)"}
	}
	if sig.KeyID != t.KeyID {
		return []string{fmt.Sprintf("the signature line names key %q, the trailer %q", sig.KeyID, t.KeyID)}
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Signature)
	if err != nil {
		return []string{fmt.Sprintf("the signature is not base64: %v", err)}
	}
	if v.Entry == nil {
		return nil // the entry's problem is reported already
	}
	if err := keys.Verify(t.KeyID, v.Entry.At, trailer, raw); err != nil {
		return []string{err.Error()}
	}
	v.KeyID = t.KeyID
	return nil
}

// fileScan reads an export line by line, hashing every line but the last two, which it keeps:
// the trailer and the signature are only known to be those at the end of the file.
type fileScan struct {
	digest   hash.Hash
	format   Format
	trailer  []byte
	last     []byte
	lines    int64
	ops      int64
	events   int64
	problems []string
	audit    auditScan
}

// MaxLine bounds one line of an export being verified: idemgate writes none near it (an
// operation's line holds its bounded params, result and events), and a file that holds one is
// refused before it is read into memory whole.
const MaxLine = 16 << 20

// readLine reads up to and including the next newline, refusing a line longer than MaxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine {
			return nil, fmt.Errorf("export: a line is longer than %d MiB: this is not a file idemgate wrote", MaxLine>>20)
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func (s *fileScan) read(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			s.body(s.trailer)
			if s.last == nil {
				s.format = detectFormat(line)
			}
			s.trailer, s.last = s.last, line
			s.lines++
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("export: read file: %w", err)
		}
	}
}

// body takes in a line known to be neither the trailer nor the signature (line number
// s.lines-1).
func (s *fileScan) body(line []byte) {
	if line == nil {
		return
	}
	_, _ = s.digest.Write(line)
	if s.format != NDJSON {
		return
	}
	n := s.lines - 1
	var probe struct {
		ID      string            `json:"id"`
		Events  []json.RawMessage `json:"events"`
		EventID string            `json:"event_id"`
	}
	switch err := json.Unmarshal(line, &probe); {
	case err == nil && probe.EventID != "":
		s.audit.entry(line, n, s)
	case err == nil && probe.ID != "":
		s.ops++
		s.events += int64(len(probe.Events))
	default:
		s.problem(fmt.Sprintf("line %d is not an exported operation or audit entry", n))
	}
}

// problem notes the first problem of the file's body; the ones after it follow from it.
func (s *fileScan) problem(p string) {
	if len(s.problems) == 0 {
		s.problems = append(s.problems, p)
	}
}

// auditScan checks the entries of an audit log export as they come: each recomputes to its
// hash, links to the one before, and follows it in sequence.
type auditScan struct {
	entries         int64
	first, last     int64
	firstPrev, prev string
}

func (a *auditScan) entry(line []byte, n int64, s *fileScan) {
	var r models.AuditRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		s.problem(fmt.Sprintf("line %d is not an audit entry: %v", n, err))
		return
	}
	e, err := r.Entry()
	if err != nil {
		s.problem(fmt.Sprintf("line %d: %v", n, err))
		return
	}
	if a.entries == 0 {
		a.first, a.firstPrev = e.Seq, e.PrevHash
	} else if err := models.CheckLink(e, a.last+1, a.prev); err != nil {
		s.problem(err.Error())
	}
	if e.ComputeHash() != e.Hash {
		s.problem(fmt.Sprintf("audit entry %d does not match its hash (edited)", e.Seq))
	}
	a.entries++
	a.last, a.prev = e.Seq, e.Hash
}

func detectFormat(first []byte) Format {
	if bytes.HasPrefix(first, []byte("{")) {
		return NDJSON
	}
	return CSV
}

func parseNDJSONTrailer(line, last []byte) (Trailer, Signature, error) {
	var t Trailer
	if err := decodeStrict(line, &t); err != nil {
		return Trailer{}, Signature{}, fmt.Errorf("not a trailer: %w", err)
	}
	if again, err := encodeTrailer(t); err != nil || !bytes.Equal(again, line) {
		return Trailer{}, Signature{}, errors.New("edited: it is not in the form the exporter writes")
	}
	var sig Signature
	if err := decodeStrict(last, &sig); err != nil {
		return Trailer{}, Signature{}, fmt.Errorf("not a signature line: %w", err)
	}
	if again, err := encodeLine(sig); err != nil || !bytes.Equal(again, last) {
		return Trailer{}, Signature{}, errors.New("signature line edited: it is not in the form the exporter writes")
	}
	return t, sig, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func parseCSVTrailer(line, last []byte) (Trailer, Signature, error) {
	row, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return Trailer{}, Signature{}, fmt.Errorf("not a CSV row: %w", err)
	}
	if len(row) != len(csvHeader) || row[0] != csvTrailerTag {
		return Trailer{}, Signature{}, fmt.Errorf("not a %s row", csvTrailerTag)
	}
	seq, err := strconv.ParseInt(row[1], 10, 64)
	if err != nil {
		return Trailer{}, Signature{}, fmt.Errorf("chain head sequence %q: %w", row[1], err)
	}
	t := Trailer{ChainHead: ChainHead{Seq: seq, Hash: row[2]}, ExportSHA256: row[3], KeyID: row[5]}
	if err := decodeStrict([]byte(row[4]), &t.AuditEntry); err != nil {
		return Trailer{}, Signature{}, fmt.Errorf("audit entry: %w", err)
	}
	body := &csvBody{}
	if again, err := body.trailer(t); err != nil || !bytes.Equal(again, line) {
		return Trailer{}, Signature{}, errors.New("edited: it is not in the form the exporter writes")
	}
	srow, err := csv.NewReader(bytes.NewReader(last)).Read()
	if err != nil || len(srow) != len(csvHeader) || srow[0] != csvSignatureTag {
		return Trailer{}, Signature{}, fmt.Errorf("the last row is not a %s row", csvSignatureTag)
	}
	sig := Signature{KeyID: srow[1], Signature: srow[2]}
	if again, err := body.signature(sig); err != nil || !bytes.Equal(again, last) {
		return Trailer{}, Signature{}, errors.New("signature row edited: it is not in the form the exporter writes")
	}
	return t, sig, nil
}

// checkAnchor checks the trailer against the file's digest and against its own audit entry,
// filling v from the entry.
func checkAnchor(t *Trailer, v *Verified, s *fileScan) []string {
	var p []string
	if t.ExportSHA256 != v.SHA256 {
		p = append(p, fmt.Sprintf("the lines before the trailer hash to %s, the trailer records %s (a line was edited, added or removed)",
			v.SHA256, t.ExportSHA256))
	}
	e, err := t.AuditEntry.Entry()
	if err != nil {
		return append(p, err.Error())
	}
	v.Entry = e
	if e.ComputeHash() != e.Hash {
		p = append(p, fmt.Sprintf("audit entry %d does not match its hash (edited)", e.Seq))
	}
	if t.ChainHead != (ChainHead{Seq: e.Seq, Hash: e.Hash}) {
		p = append(p, fmt.Sprintf("chain head %d %s is not the audit entry %d %s", t.ChainHead.Seq, t.ChainHead.Hash, e.Seq, e.Hash))
	}
	v.AuditLog = e.Action == ActionAuditExported
	if (e.Action != ActionCreated && !v.AuditLog) || e.Outcome != models.OutcomeOK {
		p = append(p, fmt.Sprintf("audit entry %d is %s/%s, not a finished export", e.Seq, e.Action, e.Outcome))
	}
	var d detail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return append(p, fmt.Sprintf("audit entry %d: detail: %v", e.Seq, err))
	}
	v.Operations, v.Events, v.Entries = d.Operations, d.Events, d.Entries
	if d.ExportSHA256 != t.ExportSHA256 {
		p = append(p, fmt.Sprintf("audit entry %d records digest %s, the trailer %s", e.Seq, d.ExportSHA256, t.ExportSHA256))
	}
	if d.Format != s.format {
		p = append(p, fmt.Sprintf("audit entry %d records a %s export, the file is %s", e.Seq, d.Format, s.format))
	}
	if s.format != NDJSON {
		return p
	}
	if !sameJSON(d.Filter, t.Filter) {
		p = append(p, fmt.Sprintf("audit entry %d records filter %s, the trailer %s", e.Seq, d.Filter, t.Filter))
	}
	a := &s.audit
	if v.AuditLog {
		if s.ops > 0 || a.entries != d.Entries || (a.entries > 0 && (a.first != d.FirstSeq || a.last != d.LastSeq)) {
			p = append(p, fmt.Sprintf("the file holds %d audit entries (%d to %d) and %d operations, audit entry %d records %d entries (%d to %d)",
				a.entries, a.first, a.last, s.ops, e.Seq, d.Entries, d.FirstSeq, d.LastSeq))
		}
		return p
	}
	if a.entries > 0 || d.Operations != s.ops || d.Events != s.events {
		p = append(p, fmt.Sprintf("the file holds %d operations and %d events, audit entry %d records %d and %d",
			s.ops, s.events, e.Seq, d.Operations, d.Events))
	}
	return p
}

// SignedAt is when an export was signed: its audit entry's time.
func (v *Verified) SignedAt() time.Time { return v.Entry.At }

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
