package control

import (
	"io/fs"
	"sort"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
)

// dirState is what the poll loop knows of one package folder.
type dirState struct {
	seen string // fingerprint at the last poll
	done string // fingerprint last read and published (or found invalid)
}

// due decides which package folders a poll reads: those whose fingerprint
// differs from the one last read and is the same as at the previous poll,
// so a package still being copied (its files changing between polls) is
// read only once it has stood still for one interval. It is pure: st is the
// state after the previous poll, cur the fingerprints now (folder → print).
// Folders that are gone are forgotten.
func due(st map[string]dirState, cur map[string]string) (map[string]dirState, []string) {
	next := make(map[string]dirState, len(cur))
	var todo []string
	for d, fp := range cur {
		s := st[d]
		if fp != s.done && fp == s.seen {
			todo = append(todo, d)
			s.done = fp
		}
		s.seen = fp
		next[d] = s
	}
	sort.Strings(todo)
	return next, todo
}

// Watch polls the models folder every interval until Close and publishes
// the packages that changed, as PublishFS does at start: a new package or a
// changed one becomes a new version (moving no traffic unless it has a
// release: plan, see ReleaseChanged), an invalid one is reported, a
// removed one is forgotten (its versions stay). Call it before the
// start's PublishFS: it takes the folder's fingerprints now, so a change
// made while the start publishes is seen by the first poll.
func (c *Controller) Watch(fsys fs.FS, root, display string, every time.Duration) {
	st, _ := fingerprints(fsys, root)
	for d, s := range st {
		st[d] = dirState{seen: s.seen, done: s.seen}
	}
	c.goUnlessClosing(func() { c.watch(fsys, root, display, every, st) })
}

// fingerprints lists the package folders of root with their fingerprint
// (as dirState.seen). A folder whose files cannot be listed gets a
// fingerprint naming the error, so it is read, and reported, like a change.
func fingerprints(fsys fs.FS, root string) (map[string]dirState, error) {
	dirs, err := modelpkg.Packages(fsys, root)
	if err != nil {
		return map[string]dirState{}, err
	}
	out := make(map[string]dirState, len(dirs))
	for _, d := range dirs {
		fp, err := modelpkg.Fingerprint(fsys, d)
		if err != nil {
			fp = "error: " + err.Error()
		}
		out[d] = dirState{seen: fp}
	}
	return out, nil
}

func (c *Controller) watch(fsys fs.FS, root, display string, every time.Duration, st map[string]dirState) {
	t := time.NewTicker(every)
	defer t.Stop()
	log := c.log.With("models", display)
	log.Info("watching the models folder", "every", every.String())
	var lastErr string
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		now, err := fingerprints(fsys, root)
		if err != nil {
			if err.Error() != lastErr {
				log.Warn("models folder unreadable; still watching", "err", err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		cur := make(map[string]string, len(now))
		for d, s := range now {
			cur[d] = s.seen
		}
		next, todo := due(st, cur)
		if len(todo) == 0 && len(next) == len(st) {
			st = next
			continue // nothing new, nothing gone
		}
		all := make([]string, 0, len(cur))
		for d := range cur {
			all = append(all, d)
		}
		sort.Strings(all)
		c.scanMu.Lock()
		sc, err := c.publishDirsLocked(c.ctx, fsys, root, display, all, todo)
		c.scanMu.Unlock()
		if err != nil {
			log.Warn("models folder change not published; will retry", "err", err)
			for _, d := range todo {
				s := next[d]
				s.done = st[d].done // read it again at the next poll
				next[d] = s
			}
			st = next
			continue
		}
		st = next
		if err := c.ReleaseChanged(c.ctx, sc.Published); err != nil {
			log.Warn("release of a changed package", "err", err)
		}
	}
}
