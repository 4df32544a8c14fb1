//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package top

import "golang.org/x/sys/unix"

// TerminalWidth is the width in columns of the terminal fd refers to, or 0
// when fd is not a terminal (output piped to a file or a script).
func TerminalWidth(fd uintptr) int {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
