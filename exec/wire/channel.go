package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// VerbChannel is `sandbox-helper channel`: the long-lived exec of a
// sandbox's persistent exec channel (see exec/inside/channel.go). Over its
// stdin and stdout run channel frames: a type byte and a 4-byte big-endian
// length, then the payload (at most MaxFrame bytes).
const VerbChannel = "channel"

// Channel frame types.
const (
	// ChanHello: server to client, once, when it is ready.
	ChanHello byte = 'H'
	// ChanRequest: client to server, a ChanCall (JSON) that starts a call.
	ChanRequest byte = 'R'
	// ChanStdin: client to server, bytes of the call's stdin (the code
	// header, the code, then the program's stdin: as a run's exec gets them).
	ChanStdin byte = 'I'
	// ChanStdinEOF: client to server, the end of the call's stdin; the call
	// ends once the server sent ChanDone and got ChanStdinEOF.
	ChanStdinEOF byte = 'E'
	// ChanOut and ChanErr: server to client, bytes of the run's stdout (its
	// frames, as a run's exec writes them) and stderr.
	ChanOut byte = 'O'
	ChanErr byte = 'e'
	// ChanDone: server to client, the call's `run` ended (ChanDoneInfo).
	ChanDone byte = 'D'
)

// ChanCall is one call through a channel: the helper's arguments after its
// path (they must start with VerbRun) and the environment the exec of `run`
// would get on top of the container's.
type ChanCall struct {
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
}

// ChanDoneInfo is how a call's `run` ended.
type ChanDoneInfo struct {
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"` // the run could not be started
}

// WriteChanFrame writes one channel frame (p at most MaxFrame bytes).
func WriteChanFrame(w io.Writer, typ byte, p []byte) error {
	if len(p) > MaxFrame {
		return fmt.Errorf("channel frame of %d bytes: more than %d", len(p), MaxFrame)
	}
	b := make([]byte, 5, 5+len(p))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	_, err := w.Write(append(b, p...))
	return err
}

// ReadChanFrame reads one channel frame into buf (grown as needed) and
// returns its type and payload.
func ReadChanFrame(r io.Reader, buf *[]byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: channel frame of %d bytes", ErrBadFrame, n)
	}
	if cap(*buf) < int(n) {
		*buf = make([]byte, n)
	}
	p := (*buf)[:n]
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, fmt.Errorf("%w: short channel frame: %v", ErrBadFrame, err)
	}
	return hdr[0], p, nil
}
