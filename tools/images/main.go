// Command images builds Skiff's container images (the proxy, istiod,
// install-cni, the example apps, a pause sandbox and a busybox shell) as OCI
// image-layout tars for `ctr -n k8s.io images import`, one per image, under
// the names the charts render. `make images` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiff-mesh/skiff/tools/images/imageset"
)

func main() {
	out := flag.String("out", "bin/images", "directory the image tars are written to")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	imgs, err := imageset.Build(ctx, *out, log)
	if err != nil {
		log.Error("images failed", "err", err)
		os.Exit(1)
	}
	for _, img := range imgs {
		fmt.Printf("%s\t%s\t%s\n", img.Name, img.Digest, img.Path)
	}
}
