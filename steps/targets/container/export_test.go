package container

// ConfigDir is where a NetworkHost run writes its proxies' configs.
func ConfigDir(c *Container) string { return c.configDir }
