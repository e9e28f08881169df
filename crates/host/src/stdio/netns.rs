//! The one socket the gateway puts into a sandboxed stdio server's network namespace: the
//! listener of its egress proxy ([`crate::egress`]'s `proxy`), at [`PROXY`].
//!
//! bubblewrap makes the namespace and can put nothing into it but a loopback interface. So
//! the socket is made by a short-lived child of the gateway: between `fork` and `exec` (std's
//! `pre_exec`, where only system calls run), it enters the user namespace that owns the
//! network namespace (in which the gateway's user, its creator, holds every capability; a
//! root gateway holds them anyway), then the network namespace, binds and
//! listens there, and passes the socket back over a socket pair (`SCM_RIGHTS`) before it
//! execs `true`. A socket keeps the namespace it was made in, so the gateway then accepts the
//! server's connections from its own namespace; nothing else crosses.
//!
//! This is the one piece of namespace code in the gateway; bubblewrap has no option for it.

use std::io;
use std::net::{SocketAddrV4, TcpListener};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Where the proxy listens inside the sandbox. The namespace is the server's alone, so the
/// port is always free; 3128 is the customary proxy port.
pub const PROXY: SocketAddrV4 = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 3128);

/// How often, and how long apart, [`listen_in`] tries again while the namespace has no
/// loopback address yet: up to five seconds in all (a second was not always enough under a
/// full test run on two cores).
const LOOPBACK_TRIES: u32 = 500;
const LOOPBACK_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// A listener at `addr` in the network namespace of process `pid` (the sandbox's first
/// process, as bubblewrap's `--info-fd` names it), non-blocking. Blocks: call it from a
/// blocking task.
///
/// bubblewrap reports the pid before its child has finished setting the namespaces up, so on
/// a busy machine the helper can come first: the bind fails with `EADDRNOTAVAIL` (no loopback
/// yet). Then it is tried again, [`LOOPBACK_TRIES`] times [`LOOPBACK_WAIT`] apart.
///
/// The user namespace entered is the network namespace's owner (`NS_GET_USERNS`), not the
/// process's own: with `--dev`, bubblewrap first maps the user to root (to mount devpts), then
/// moves the sandbox into a second, nested user namespace that maps it back. A helper that
/// came after that move and entered `/proc/PID/ns/user` held no capability over the network
/// namespace, and every try failed with `EPERM` (seen under a full test run on two cores).
pub fn listen_in(pid: u32, addr: SocketAddrV4) -> io::Result<TcpListener> {
    let mut tries = 0;
    loop {
        match listen_once(pid, addr) {
            Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable && tries < LOOPBACK_TRIES => {
                tries += 1;
                std::thread::sleep(LOOPBACK_WAIT);
            }
            done => return done,
        }
    }
}

/// One try of [`listen_in`].
fn listen_once(pid: u32, addr: SocketAddrV4) -> io::Result<TcpListener> {
    let net = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    let user = std::fs::File::from(owner(&net)?);
    // Entering the user namespace one is already in fails; a gateway that runs bubblewrap
    // without a user namespace of its own (setuid bubblewrap) skips that step.
    let ours = std::fs::metadata("/proc/self/ns/user")?;
    let theirs = user.metadata()?;
    let enter_user = (ours.dev(), ours.ino()) != (theirs.dev(), theirs.ino());
    let (here, there) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let (user_fd, net_fd, there_fd) = (user.as_raw_fd(), net.as_raw_fd(), there.as_raw_fd());
    let mut child = std::process::Command::new("/usr/bin/true");
    child
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[allow(
        unsafe_code,
        reason = "system calls between fork and exec, as pre_exec requires"
    )]
    // SAFETY: the closure runs in the forked child before `exec`, and makes system calls
    // only: no allocation, no lock, nothing another thread of the gateway could hold. The
    // descriptors it borrows stay open in the parent until `status` returns.
    unsafe {
        child.pre_exec(move || {
            let borrow = |fd| BorrowedFd::borrow_raw(fd);
            if enter_user {
                move_into_link_name_space(borrow(user_fd), Some(LinkNameSpaceType::User))?;
            }
            move_into_link_name_space(borrow(net_fd), Some(LinkNameSpaceType::Network))?;
            let socket = rustix::net::socket_with(
                AddressFamily::INET,
                SocketType::STREAM,
                SocketFlags::CLOEXEC,
                None,
            )?;
            rustix::net::bind(&socket, &addr)?;
            rustix::net::listen(&socket, 128)?;
            let fds = [socket.as_fd()];
            let mut space =
                [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(&fds));
            rustix::net::sendmsg(
                borrow(there_fd),
                &[io::IoSlice::new(b"l")],
                &mut control,
                SendFlags::empty(),
            )?;
            Ok(())
        });
    }
    let status = child.status().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot enter the sandbox's network namespace: {e}"),
        )
    })?;
    drop(there);
    if !status.success() {
        return Err(io::Error::other(format!(
            "the helper that enters the sandbox's network namespace failed ({status})"
        )));
    }
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        &here,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )?;
    let socket: Option<OwnedFd> = control.drain().find_map(|message| match message {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    let socket = socket.ok_or_else(|| io::Error::other("no socket came back from the sandbox"))?;
    let listener = TcpListener::from(socket);
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The user namespace that owns the namespace `ns` (`ioctl(NS_GET_USERNS)`).
fn owner(ns: &std::fs::File) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd as _;
    #[allow(unsafe_code, reason = "an ioctl rustix does not wrap")]
    // SAFETY: `NS_GET_USERNS` takes no argument and returns a new descriptor, or -1.
    let fd = unsafe { libc::ioctl(ns.as_raw_fd(), libc::NS_GET_USERNS) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is new and ours alone.
    #[allow(unsafe_code, reason = "owning the descriptor the ioctl returned")]
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
