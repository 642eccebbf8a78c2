// Command image builds idemgate's container image without a daemon, a registry or a base
// image to pull: an empty base plus the static binary, the CA certificates, a non-root user,
// /tmp and a writable data directory. It writes an OCI image layout and a `docker load`
// tarball, and the same source gives the same image digest (file times and the creation time
// are fixed, the binary is built with -trimpath and without VCS stamping):
//
//	go run ./deploy/image -out dist/image [-version v1.4.0]
//
// then `docker load -i dist/image/idemgate.tar` or `podman load -i dist/image/idemgate.tar`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "", "the directory to write the OCI layout (oci/) and the docker tarball (idemgate.tar) into")
	version := fs.String("version", "devel", "the release the binary reports (idemgate version) and the image's tag")
	revision := fs.String("revision", "unknown", "the VCS revision the binary reports")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: go run ./deploy/image -out DIR [-version V] [-revision R]")
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(*out, "idemgate")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := buildBinary(ctx, root, bin, *version, *revision); err != nil {
		return err
	}
	img, err := Build(Options{Binary: bin, Version: *version})
	if err != nil {
		return err
	}
	digest, err := Write(img, *out, "idemgate:"+*version)
	if err != nil {
		return err
	}
	fmt.Printf("idemgate:%s %s\n%s\n%s\n", *version, digest, filepath.Join(*out, "oci"), filepath.Join(*out, "idemgate.tar"))
	return nil
}
