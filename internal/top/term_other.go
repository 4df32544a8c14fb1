//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package top

// TerminalWidth is 0 here: the width is not known, lines are not cut.
func TerminalWidth(fd uintptr) int { return 0 }
