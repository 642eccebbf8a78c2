package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	want := flag.String("want", "", "how many objects of each kind must render, e.g. Deployment=2,Job=1 (any other kind fails)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: check [-want Kind=N,…] [FILE…]  (no FILE: standard input)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(flag.Args(), *want, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(files []string, want string, stdin io.Reader, stdout io.Writer) error {
	var readers []io.Reader
	for _, f := range files {
		file, err := os.Open(f)
		if err != nil {
			return err
		}
		defer file.Close()
		readers = append(readers, file, strings.NewReader("\n---\n"))
	}
	in := stdin
	if len(readers) > 0 {
		in = io.MultiReader(readers...)
	}
	objs, errs := Decode(in)
	errs = append(errs, Rules(objs)...)
	errs = append(errs, Wiring(objs)...)
	errs = append(errs, Counts(objs, want)...)
	if len(objs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no manifests"))
	}
	for _, err := range errs {
		fmt.Fprintln(stdout, "FAIL", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of the rendered manifests' checks failed", len(errs))
	}
	for _, o := range objs {
		fmt.Fprintf(stdout, "ok   %s/%s (%s)\n", o.Kind, o.Name, o.Source)
	}
	return nil
}
