package cluster

import (
	"context"
	"log/slog"

	"github.com/skiff-mesh/skiff/tools/images/imageset"
)

// BuildImages builds Skiff's images (as `make images` does) into outDir
// and returns their tars.
func BuildImages(ctx context.Context, outDir string, log *slog.Logger) ([]string, error) {
	imgs, err := imageset.Build(ctx, outDir, log)
	if err != nil {
		return nil, err
	}
	tars := make([]string, len(imgs))
	for i, img := range imgs {
		tars[i] = img.Path
	}
	return tars, nil
}
