package images

// CompressionLevel is the layers' gzip level, for BenchmarkWriteTarball.
var CompressionLevel = &compressionLevel
