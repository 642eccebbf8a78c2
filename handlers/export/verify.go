package export

import (
	"bufio"
	"bytes"
	"crypto/sha256"
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

	"github.com/idemgate/idemgate/models"
)

// Verified describes an export that passed the offline check.
type Verified struct {
	Format Format
	// Operations and Events are as the audit entry records them; for NDJSON they were also
	// counted in the file.
	Operations int64
	Events     int64
	SHA256     string
	// Entry is the export's audit entry, carried by the trailer. Whether it is part of the live
	// chain can only be told by the ledger (see models.Ledger.AuditEntryAt).
	Entry *models.AuditEntry
}

// Invalid is the answer for an export that fails the check: every problem found, in order.
type Invalid struct {
	Problems []string
}

func (e *Invalid) Error() string {
	return "export check failed: " + strings.Join(e.Problems, "; ")
}

// VerifyFile checks an export (NDJSON or CSV, told apart by its first line) offline, without a
// database, reading it once in constant memory beyond its longest line: the SHA-256 of every
// line before the trailer must equal the trailer's export_sha256; the trailer's audit entry
// must recompute to its own hash, be the chain head the trailer names, and record the same
// digest, format and filter (and, for NDJSON, the number of operations and events counted in
// the file); the trailer must be byte for byte what the exporter writes. Any edit, removal or
// addition of a line fails one of these and is reported as *Invalid.
//
// The check proves the file is the one that audit entry describes. That the entry is genuine
// — not forged along with a rewritten file — is proved by finding it in the live chain.
func VerifyFile(r io.Reader) (*Verified, error) {
	s := fileScan{digest: sha256.New()}
	if err := s.read(bufio.NewReaderSize(r, 64<<10)); err != nil {
		return nil, err
	}
	if s.last == nil {
		return nil, &Invalid{Problems: []string{"the file is empty"}}
	}
	var t Trailer
	var err error
	if s.format == NDJSON {
		t, err = parseNDJSONTrailer(s.last)
	} else {
		t, err = parseCSVTrailer(s.last)
	}
	if err != nil {
		return nil, &Invalid{Problems: append(s.problems, fmt.Sprintf("trailer (line %d): %v", s.lines, err))}
	}
	v := &Verified{Format: s.format, SHA256: hex.EncodeToString(s.digest.Sum(nil))}
	problems := append(s.problems, checkAnchor(&t, v, &s)...)
	if len(problems) > 0 {
		return nil, &Invalid{Problems: problems}
	}
	return v, nil
}

// fileScan reads an export line by line, hashing every line but the last, which it keeps: the
// trailer is only known to be the trailer at the end of the file.
type fileScan struct {
	digest   hash.Hash
	format   Format
	last     []byte
	lines    int64
	ops      int64
	events   int64
	problems []string
}

func (s *fileScan) read(br *bufio.Reader) error {
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.body(s.last)
			if s.last == nil {
				s.format = detectFormat(line)
			}
			s.last = line
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

// body takes in a line known not to be the trailer.
func (s *fileScan) body(line []byte) {
	if line == nil {
		return
	}
	_, _ = s.digest.Write(line)
	if s.format != NDJSON {
		return
	}
	var probe struct {
		ID     string            `json:"id"`
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(line, &probe); err != nil || probe.ID == "" {
		if len(s.problems) == 0 {
			s.problems = append(s.problems, fmt.Sprintf("line %d is not an exported operation", s.lines))
		}
		return
	}
	s.ops++
	s.events += int64(len(probe.Events))
}

func detectFormat(first []byte) Format {
	if bytes.HasPrefix(first, []byte("{")) {
		return NDJSON
	}
	return CSV
}

func parseNDJSONTrailer(line []byte) (Trailer, error) {
	var t Trailer
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Trailer{}, fmt.Errorf("not a trailer: %w", err)
	}
	if again, err := encodeTrailer(t); err != nil || !bytes.Equal(again, line) {
		return Trailer{}, errors.New("edited: it is not in the form the exporter writes")
	}
	return t, nil
}

func parseCSVTrailer(line []byte) (Trailer, error) {
	row, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return Trailer{}, fmt.Errorf("not a CSV row: %w", err)
	}
	if len(row) != len(csvHeader) || row[0] != csvTrailerTag {
		return Trailer{}, fmt.Errorf("not a %s row", csvTrailerTag)
	}
	seq, err := strconv.ParseInt(row[1], 10, 64)
	if err != nil {
		return Trailer{}, fmt.Errorf("chain head sequence %q: %w", row[1], err)
	}
	t := Trailer{ChainHead: ChainHead{Seq: seq, Hash: row[2]}, ExportSHA256: row[3]}
	dec := json.NewDecoder(strings.NewReader(row[4]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t.AuditEntry); err != nil {
		return Trailer{}, fmt.Errorf("audit entry: %w", err)
	}
	var again bytes.Buffer
	if err := writeCSVTrailer(&again, t); err != nil || !bytes.Equal(again.Bytes(), line) {
		return Trailer{}, errors.New("edited: it is not in the form the exporter writes")
	}
	return t, nil
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
	if e.Action != ActionCreated || e.Outcome != "ok" {
		p = append(p, fmt.Sprintf("audit entry %d is %s/%s, not a finished export", e.Seq, e.Action, e.Outcome))
	}
	var d detail
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		return append(p, fmt.Sprintf("audit entry %d: detail: %v", e.Seq, err))
	}
	v.Operations, v.Events = d.Operations, d.Events
	if d.ExportSHA256 != t.ExportSHA256 {
		p = append(p, fmt.Sprintf("audit entry %d records digest %s, the trailer %s", e.Seq, d.ExportSHA256, t.ExportSHA256))
	}
	if d.Format != s.format {
		p = append(p, fmt.Sprintf("audit entry %d records a %s export, the file is %s", e.Seq, d.Format, s.format))
	}
	if s.format == NDJSON {
		if !sameJSON(d.Filter, t.Filter) {
			p = append(p, fmt.Sprintf("audit entry %d records filter %s, the trailer %s", e.Seq, d.Filter, t.Filter))
		}
		if d.Operations != s.ops || d.Events != s.events {
			p = append(p, fmt.Sprintf("the file holds %d operations and %d events, audit entry %d records %d and %d",
				s.ops, s.events, e.Seq, d.Operations, d.Events))
		}
	}
	return p
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
