// Command helloplugin is the anchor of scripts/bench.sh's metadata row: a
// Docker CLI plugin of the standard library alone, answering the metadata
// call as every plugin must.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "docker-cli-plugin-metadata" {
		fmt.Print("{\n     \"SchemaVersion\": \"0.1.0\",\n     \"Vendor\": \"bench\",\n     \"Version\": \"0.0.0\",\n     \"ShortDescription\": \"hello\"\n}\n")
		return
	}
	fmt.Println("hello")
}
