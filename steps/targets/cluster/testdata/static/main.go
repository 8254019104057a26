// Command static is a program built with CGO_ENABLED=0 for the tests of
// the local node's images.
package main

func main() {}
