package driver

import (
	"context"
	"sync"
	"time"

	"github.com/ceph/go-ceph/rados"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ConnPool keeps one RADOS connection per set of credentials, so calls
// share connections instead of starting a client (or a process) each.
// Connections idle for longer than the pool's idle time are shut down.
// It is safe for concurrent use.
type ConnPool struct {
	monitors string
	timeout  time.Duration
	idle     time.Duration

	mu    sync.Mutex
	conns map[string]*pooledConn
	done  chan struct{}
	once  sync.Once
}

type pooledConn struct {
	conn     *rados.Conn
	creds    Credentials
	mu       sync.Mutex
	ioctxs   map[[2]string]*rados.IOContext // pool, namespace
	lastUsed time.Time
	users    int
}

// NewConnPool returns a pool connecting to monitors (comma-separated
// host:port list). opTimeout bounds every monitor and OSD operation;
// idle connections are closed after idle.
func NewConnPool(monitors string, opTimeout, idle time.Duration) *ConnPool {
	p := &ConnPool{monitors: monitors, timeout: opTimeout, idle: idle, conns: map[string]*pooledConn{}, done: make(chan struct{})}
	go p.reap()
	return p
}

func (p *ConnPool) reap() {
	t := time.NewTicker(p.idle/2 + time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		for k, c := range p.conns {
			if c.users == 0 && time.Since(c.lastUsed) > p.idle {
				delete(p.conns, k)
				c.shutdown()
			}
		}
		p.mu.Unlock()
	}
}

// Close shuts every connection down.
func (p *ConnPool) Close() {
	p.once.Do(func() { close(p.done) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.conns {
		delete(p.conns, k)
		c.shutdown()
	}
}

func (c *pooledConn) shutdown() {
	for _, io := range c.ioctxs {
		io.Destroy()
	}
	c.conn.Shutdown()
}

// Credentials returns the credentials of every connection in the pool (for
// the background sweep, which has no request to take them from).
func (p *ConnPool) Credentials() []Credentials {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Credentials, 0, len(p.conns))
	for _, c := range p.conns {
		out = append(out, c.creds)
	}
	return out
}

// IOContext returns a shared I/O context on pool (and RADOS namespace ns)
// for creds, connecting first if needed, and a release function to call
// when done. A missing pool is NotFound.
func (p *ConnPool) IOContext(ctx context.Context, creds Credentials, pool, ns string) (*rados.IOContext, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, status.FromContextError(err).Err()
	}
	c, err := p.get(creds)
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		p.mu.Lock()
		c.users--
		c.lastUsed = time.Now()
		p.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]string{pool, ns}
	if io, ok := c.ioctxs[key]; ok {
		return io, release, nil
	}
	io, err := c.conn.OpenIOContext(pool)
	if err != nil {
		release()
		if cephErrno(err) == 2 {
			return nil, nil, status.Errorf(codes.NotFound, "Ceph pool %q does not exist", pool)
		}
		return nil, nil, backendError(err, "open pool "+pool)
	}
	io.SetNamespace(ns)
	c.ioctxs[key] = io
	return io, release, nil
}

// Conn returns the shared connection for creds and a release function.
func (p *ConnPool) Conn(ctx context.Context, creds Credentials) (*rados.Conn, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, status.FromContextError(err).Err()
	}
	c, err := p.get(creds)
	if err != nil {
		return nil, nil, err
	}
	return c.conn, func() {
		p.mu.Lock()
		c.users--
		c.lastUsed = time.Now()
		p.mu.Unlock()
	}, nil
}

func (p *ConnPool) get(creds Credentials) (*pooledConn, error) {
	key := creds.fingerprint()
	p.mu.Lock()
	if c, ok := p.conns[key]; ok {
		c.users++
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	// Connect outside the lock: a slow monitor must not block other users.
	conn, err := p.connect(creds)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[key]; ok { // lost a race: keep the first
		conn.Shutdown()
		c.users++
		return c, nil
	}
	c := &pooledConn{conn: conn, creds: creds, ioctxs: map[[2]string]*rados.IOContext{}, users: 1}
	p.conns[key] = c
	return c, nil
}

// connect opens a client with the key passed as a config option: it is
// never written to a file, an argument list or the environment. No config
// file is read, so nothing on the host changes what the driver talks to.
func (p *ConnPool) connect(creds Credentials) (*rados.Conn, error) {
	conn, err := rados.NewConnWithUser(creds.User)
	if err != nil {
		return nil, backendError(err, "create Ceph client")
	}
	secs := itoa(int64(max(p.timeout/time.Second, 1)))
	for _, kv := range [][2]string{
		{"mon_host", p.monitors},
		{"key", creds.Key},
		{"keyring", ""},
		{"admin_socket", ""},
		{"log_file", ""},
		{"log_to_stderr", "false"},
		// The controller never does image I/O: no cache (and no cache
		// flusher thread) per opened image.
		{"rbd_cache", "false"},
		{"err_to_stderr", "false"},
		{"client_mount_timeout", secs},
		{"rados_mon_op_timeout", secs},
		{"rados_osd_op_timeout", secs},
	} {
		if err := conn.SetConfigOption(kv[0], kv[1]); err != nil {
			conn.Shutdown()
			return nil, status.Errorf(codes.Internal, "configure Ceph client option %s: %v", kv[0], cephErrnoText(err))
		}
	}
	if err := conn.Connect(); err != nil {
		conn.Shutdown()
		return nil, backendError(err, "connect to the Ceph monitors "+p.monitors+" with the user of the CSI secrets")
	}
	return conn, nil
}

// cephErrnoText describes err without anything the caller passed in.
func cephErrnoText(err error) string {
	if n := cephErrno(err); n != 0 {
		return "errno " + itoa(int64(n))
	}
	return "failed"
}
