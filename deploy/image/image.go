package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, and no name a base image would have taken.
const (
	uid     = 65532
	dataDir = "/var/lib/idemgate"
)

// epoch is every file's time and the image's creation time: the same source, the same digest.
var epoch = time.Unix(0, 0).UTC()

// Options say what goes in the image.
type Options struct {
	Binary  string // the static idemgate binary
	Version string // the release, for the image's labels
	// CACerts is the CA bundle copied in (default: the build machine's Debian bundle).
	CACerts string
}

// Build makes the image: one layer over an empty base.
func Build(o Options) (v1.Image, error) {
	if o.CACerts == "" {
		o.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("the binary: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("the CA certificates: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		uid  int
		body []byte // nil: a directory
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/passwd", 0o644, 0, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nidemgate:x:%d:%d:idemgate:%s:/sbin/nologin\n", uid, uid, dataDir))},
		{"etc/group", 0o644, 0, []byte(fmt.Sprintf("root:x:0:\nidemgate:x:%d:\n", uid))},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, certs},
		{"tmp/", 0o1777, 0, nil},
		{"usr/", 0o755, 0, nil},
		{"usr/local/", 0o755, 0, nil},
		{"usr/local/bin/", 0o755, 0, nil},
		{"usr/local/bin/idemgate", 0o755, 0, bin},
		{"var/", 0o755, 0, nil},
		{"var/lib/", 0o755, 0, nil},
		{strings.TrimPrefix(dataDir, "/") + "/", 0o700, uid, nil},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.Config.WorkingDir = dataDir
	cfg.Config.Entrypoint = []string{"/usr/local/bin/idemgate"}
	cfg.Config.Cmd = []string{"serve", "--addr", "0.0.0.0:8080"}
	cfg.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	cfg.Config.StopSignal = "SIGTERM"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "idemgate",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	return mutate.ConfigFile(img, cfg)
}

// Write puts img in dir as an OCI layout (dir/oci) and a docker tarball tagged tag
// (dir/idemgate.tar), and returns its digest.
func Write(img v1.Image, dir, tag string) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	ociDir := filepath.Join(dir, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.WriteToFile(filepath.Join(dir, "idemgate.tar"), ref, img); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// buildBinary builds a static idemgate as a release is built: no cgo, -trimpath, no VCS
// stamping, the version and revision set with the linker.
func buildBinary(ctx context.Context, root, out, version, revision string) error {
	pkg := "github.com/idemgate/idemgate/internal/buildinfo"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", pkg, version, pkg, revision),
		"-o", out, "./cmd/idemgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// moduleRoot is the directory of the repository's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the idemgate module")
	}
	return filepath.Dir(mod), nil
}
