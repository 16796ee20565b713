// A local OCI registry (the CNCF distribution project's, which helm's own tests use), for the
// tests that push the chart and install it from oci://: registry ADDRESS DIRECTORY.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: registry ADDRESS DIRECTORY")
		os.Exit(2)
	}
	config := &configuration.Configuration{}
	config.HTTP.Addr = os.Args[1]
	config.Log.Level = "warn"
	config.Storage = configuration.Storage{
		"filesystem": configuration.Parameters{"rootdirectory": os.Args[2]},
	}
	server, err := registry.NewRegistry(context.Background(), config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := server.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
