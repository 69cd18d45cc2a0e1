//go:build linux

package driver

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/quota"
)

// Project IDs the driver gives directory volumes lie in
// [projectBase, projectBase+projectSpan): far above the small IDs
// administrators give their own projects.
const (
	projectBase = 1 << 30
	projectSpan = 1 << 30
)

// projects hands out filesystem project IDs to directory volumes, one per
// volume, rebuilt from the volumes' records at start. A volume's ID is
// derived from a hash of its volume ID (so a retried create gets the same
// one) and moved on while taken: by another volume, or by files on the
// filesystem (a project with usage is someone's).
type projects struct {
	mu    sync.Mutex
	taken map[quota.ProjectID]string // project → volume ID
}

func newProjects() *projects {
	return &projects{taken: map[quota.ProjectID]string{}}
}

// allocate returns a free project ID for volume id; fsPath is any path on
// the filesystem, to look for files of a candidate project.
func (p *projects) allocate(ctx context.Context, id, fsPath string) (quota.ProjectID, error) {
	h := fnv.New32a()
	h.Write([]byte(id))
	start := h.Sum32() % projectSpan
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := uint32(0); i < 1024; i++ {
		cand := quota.ProjectID(projectBase + (start+i)%projectSpan)
		if owner, ok := p.taken[cand]; ok && owner != id {
			continue
		}
		u, err := quota.Get(ctx, fsPath, cand)
		if err != nil {
			return 0, err
		}
		if u.Inodes > 0 && p.taken[cand] != id {
			continue
		}
		p.taken[cand] = id
		return cand, nil
	}
	return 0, status.Errorf(codes.ResourceExhausted, "no free filesystem project ID for volume %s", id)
}

// release frees project pid if volume id holds it.
func (p *projects) release(pid quota.ProjectID, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken[pid] == id {
		delete(p.taken, pid)
	}
}

// checkQuotas finds out once, at start, whether directory volumes can
// have their capacity enforced, and says so.
func (d *Driver) checkQuotas(ctx context.Context) {
	dir := d.volumesRoot()
	if err := quota.Check(ctx, dir); err != nil {
		// Most hosts have no project quotas: that is how the driver runs
		// there, not a fault, so it is said at INFO with how to change it.
		// Only a check that could not tell (no ErrUnsupported) warns.
		log := d.log.Info
		if !errors.Is(err, quota.ErrUnsupported) {
			log = d.log.Warn
		}
		log("directory volumes: capacity is accounted but not enforced, as the state directory's filesystem has no project quotas "+
			"(to enforce it, put --state-dir on xfs mounted with prjquota, or on ext4 made with -O quota,project and mounted with prjquota)",
			"path", dir, "reason", err)
		return
	}
	d.quotas = true
	d.log.Info("directory volumes: capacity enforced with project quotas", "path", dir)
}

// limitDir gives a new, empty directory volume its own project and a hard
// limit of its capacity, recording the project in v. Without project
// quotas it does nothing.
func (d *Driver) limitDir(ctx context.Context, v *volume, dir string) error {
	if !d.quotas {
		return nil
	}
	pid, err := d.projects.allocate(ctx, v.ID, dir)
	if err == nil {
		err = quota.SetProject(ctx, dir, pid)
	}
	if err == nil {
		err = quota.SetLimit(ctx, dir, pid, v.Capacity)
	}
	if err != nil {
		if pid != 0 {
			d.projects.release(pid, v.ID)
		}
		return status.Errorf(status.Code(err), "limit volume %s to %d bytes: %v", v.ID, v.Capacity, err)
	}
	v.ProjectID = uint32(pid)
	return nil
}

// unlimitDir removes the limit of a deleted directory volume's project
// and frees the project ID.
func (d *Driver) unlimitDir(ctx context.Context, v *volume) {
	if v.ProjectID == 0 {
		return
	}
	pid := quota.ProjectID(v.ProjectID)
	if err := quota.SetLimit(ctx, d.volumesRoot(), pid, 0); err != nil {
		d.log.Warn("could not remove the project quota of a deleted volume", "volume", v.ID, "project", pid, "error", err)
	}
	d.projects.release(pid, v.ID)
}
