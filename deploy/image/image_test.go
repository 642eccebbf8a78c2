package main

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImageIsReproducible builds the binary and the image twice, as two release builds of the
// same source would, and gets the same bytes and the same digest; the image is what the
// Dockerfile-less recipe promises (a non-root user, the entrypoint and command, the port, a
// writable data directory and /tmp, the CA bundle), and the OCI layout and the docker tarball
// both hold it.
func TestImageIsReproducible(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	ctx := context.Background()
	var digests []string
	var bins [][]byte
	for i := range 2 {
		dir := t.TempDir()
		bin := filepath.Join(dir, "idemgate")
		require.NoError(t, buildBinary(ctx, root, bin, "v9.9.9-test", "0123abcd"))
		b, err := os.ReadFile(bin)
		require.NoError(t, err)
		bins = append(bins, b)
		img, err := Build(Options{Binary: bin, Version: "v9.9.9-test"})
		require.NoError(t, err)
		digest, err := Write(img, dir, "idemgate:v9.9.9-test")
		require.NoError(t, err)
		digests = append(digests, digest.String())
		t.Logf("build %d: %s", i+1, digest)

		idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "oci"))
		require.NoError(t, err)
		m, err := idx.IndexManifest()
		require.NoError(t, err)
		require.Len(t, m.Manifests, 1)
		assert.Equal(t, digest, m.Manifests[0].Digest, "the OCI layout holds the image")
		tarInfo, err := os.Stat(filepath.Join(dir, "idemgate.tar"))
		require.NoError(t, err)
		t.Logf("docker tarball: %.1f MB", float64(tarInfo.Size())/1e6)
		if i == 0 {
			docsGiveTheImageSize(t, root, float64(tarInfo.Size())/1e6)
		}

		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, "65532:65532", cfg.Config.User, "not root")
		assert.Equal(t, []string{"/usr/local/bin/idemgate"}, cfg.Config.Entrypoint)
		assert.Equal(t, []string{"serve", "--addr", "0.0.0.0:8080"}, cfg.Config.Cmd)
		assert.Contains(t, cfg.Config.ExposedPorts, "8080/tcp")
		assert.Equal(t, "/var/lib/idemgate", cfg.Config.WorkingDir)

		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		rc, err := layers[0].Uncompressed()
		require.NoError(t, err)
		files := map[string]*tar.Header{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			files[h.Name] = h
		}
		require.NoError(t, rc.Close())
		require.Contains(t, files, "tmp/")
		assert.EqualValues(t, 0o1777, files["tmp/"].Mode, "/tmp for everyone, sticky")
		require.Contains(t, files, "var/lib/idemgate/")
		assert.Equal(t, 65532, files["var/lib/idemgate/"].Uid, "the data directory is the user's")
		assert.Contains(t, files, "etc/ssl/certs/ca-certificates.crt")
		assert.Contains(t, files, "etc/passwd")
		assert.EqualValues(t, 0o755, files["usr/local/bin/idemgate"].Mode)
	}
	assert.Equal(t, bins[0], bins[1], "the same source builds the same binary")
	assert.Equal(t, digests[0], digests[1], "and the same image")
}

// docsGiveTheImageSize (issue 50 item 21): the size the README and OPERATIONS.md give the image
// ("about N MB") is the size of the docker tarball just built, to within 1 MB; they said 14.7 MB
// of an image that had grown past it.
func docsGiveTheImageSize(t *testing.T, root string, mb float64) {
	t.Helper()
	sizeRE := regexp.MustCompile(`(?:image of|tarball is) about (\d+) MB`)
	for _, doc := range []string{"README.md", "docs/OPERATIONS.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		m := sizeRE.FindSubmatch(b)
		require.NotNil(t, m, "%s gives no image size as %s", doc, sizeRE)
		said, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		assert.InDelta(t, mb, float64(said), 1, "%s says the image is about %d MB; the tarball built is %.1f MB", doc, said, mb)
	}
}
