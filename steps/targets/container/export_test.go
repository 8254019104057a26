package container

// ConfigDir is where a NetworkHost run writes its proxies' configs.
func ConfigDir(c *Container) string { return c.configDir }

// SweepConfigDirs is sweepConfigDirs.
func SweepConfigDirs() error { return sweepConfigDirs() }

// ConfigDirPrefix is the name of this HostID's configs folders up to the pid.
func ConfigDirPrefix() string { return hostConfigDirs() }
