//go:build race

package torture

func init() { raceBuild = true }
