// Package static holds what the gateway serves as files: the console's stylesheet, script and
// images, and the OpenAPI document of the agent API. They are embedded in the binary, so the
// console works offline and under a strict Content-Security-Policy (default-src 'self'):
// nothing is loaded from a CDN.
//
// Every file is served at a content-hashed URL, such as /static/app.3f2a9c1d.css, with a
// cache lifetime of a year. A changed file gets a new URL, so browsers never use a stale copy
// and never need to revalidate a current one. Pages link to files through Path; Handler serves
// them.
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// URLPrefix is the path under which Handler serves the files.
const URLPrefix = "/static/"

// cacheControl lets browsers and proxies keep a file for a year without asking again: its URL
// changes whenever its content does.
const cacheControl = "public, max-age=31536000, immutable"

// files holds the embedded assets; their names are relative to the assets directory.
//
//go:embed assets
var files embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	name    string // logical name, such as "app.css"
	content []byte
	etag    string // the quoted content hash
}

// table indexes the embedded files by logical name and by hashed URL.
type table struct {
	urls  map[string]string // logical name → hashed URL
	byURL map[string]asset  // hashed URL → file
}

// assets hashes every embedded file once, on first use, and is read-only afterwards.
var assets = sync.OnceValue(func() table {
	root, err := fs.Sub(files, "assets")
	if err != nil {
		panic(fmt.Sprintf("static: %v", err))
	}
	t, err := index(root)
	if err != nil {
		// The files are compiled into the binary: failing to read them is a broken build.
		panic(fmt.Sprintf("static: %v", err))
	}
	return t
})

// index reads every file of root and computes its hashed URL.
func index(root fs.FS) (table, error) {
	t := table{urls: map[string]string{}, byURL: map[string]asset{}}
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(root, name)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		sum := sha256.Sum256(content)
		hash := hex.EncodeToString(sum[:4])
		url := URLPrefix + hashedName(name, hash)
		t.urls[name] = url
		t.byURL[url] = asset{name: name, content: content, etag: `"` + hash + `"`}
		return nil
	})
	return t, err
}

// hashedName inserts hash before the extension of name's last element: "app.css" becomes
// "app.<hash>.css", and "img/logo.svg" becomes "img/logo.<hash>.svg".
func hashedName(name, hash string) string {
	ext := path.Ext(path.Base(name))
	return strings.TrimSuffix(name, ext) + "." + hash + ext
}

// Path returns the content-hashed URL of the embedded file with the given name, such as
// "/static/app.3f2a9c1d.css" for "app.css".
//
// Names are fixed in templates, so an unknown name is a programming error: Path panics rather
// than render a link that can never load. Rendering a page in a test is enough to catch it.
func Path(name string) string {
	url, ok := assets().urls[name]
	if !ok {
		panic(fmt.Sprintf("static: no embedded file named %q", name))
	}
	return url
}

// Handler serves the embedded files at the URLs Path returns. It expects the full request path
// (mount it at /static/ without stripping the prefix). It answers GET and HEAD, supports
// conditional and range requests, and answers 404 for any other path, including a file's name
// without its hash or with an outdated hash.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a, ok := assets().byURL[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		// ServeContent sets Content-Type from the extension and answers If-None-Match and
		// Range. Embedded files have no modification time, hence the zero time.
		http.ServeContent(w, r, path.Base(a.name), time.Time{}, bytes.NewReader(a.content))
	})
}
