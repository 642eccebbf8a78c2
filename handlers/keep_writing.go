package handlers

import (
	"io"
	"net/http"
	"time"
)

// KeepWriting returns a writer to w that moves w's write deadline to per from now before each
// write, for an answer that streams for longer than the server's write timeout (an export
// download): the stream lives as long as the client keeps taking it, and a client that stops
// reading is still cut off after per.
func KeepWriting(w http.ResponseWriter, per time.Duration) io.Writer {
	return &keepWriting{w: w, rc: http.NewResponseController(w), per: per}
}

type keepWriting struct {
	w   io.Writer
	rc  *http.ResponseController
	per time.Duration
}

func (k *keepWriting) Write(p []byte) (int, error) {
	// ErrNotSupported (a writer without deadlines, as in tests' recorders) leaves the server's.
	_ = k.rc.SetWriteDeadline(time.Now().Add(k.per))
	return k.w.Write(p)
}
