package toolsimport

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a command line into words as a POSIX shell would, without expanding
// anything: blanks separate words; 'single quotes' keep everything literally; "double quotes"
// keep everything but a backslash before \ " $ or `, which stands for that character; outside
// quotes a backslash keeps the next character. A quote left open is an error, not a guess.
func SplitCommand(line string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   rune // 0, '\'' or '"'
		escaped bool
	)
	for _, r := range line {
		switch {
		case escaped:
			if quote == '"' && !strings.ContainsRune("\\\"$`", r) {
				cur.WriteByte('\\') // in double quotes, other backslashes stay
			}
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case escaped:
		return nil, errors.New("command line ends in a backslash")
	case quote != 0:
		return nil, fmt.Errorf("command line has an unclosed %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command line")
	}
	return words, nil
}
