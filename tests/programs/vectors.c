// vectors: the kernel writes and reads watched globals through iovecs: readv(2) from a pipe into
// `head` and `tail`, writev(2) of both to stdout, then sendmsg(2) of `tail` over a socketpair and
// recvmsg(2) of it into `mail`. Prints "headtail\n" then "mail=tail\n"; exits 0, or 1 when a call
// does not do what it would do without a debugger.
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

char head[4];
char tail[4];
char mail[8];

int main(void) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  if (write(fds[1], "headtail", 8) != 8) return 1;
  struct iovec in[2] = {{head, 4}, {tail, 4}};
  if (readv(fds[0], in, 2) != 8) return 1;
  struct iovec out[3] = {{head, 4}, {tail, 4}, {"\n", 1}};
  if (writev(1, out, 3) != 9) return 1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  struct iovec send_iov = {tail, 4};
  struct msghdr send_msg = {0};
  send_msg.msg_iov = &send_iov;
  send_msg.msg_iovlen = 1;
  if (sendmsg(sv[0], &send_msg, 0) != 4) return 1;
  struct iovec recv_iov = {mail, sizeof(mail)};
  struct msghdr recv_msg = {0};
  recv_msg.msg_iov = &recv_iov;
  recv_msg.msg_iovlen = 1;
  if (recvmsg(sv[1], &recv_msg, 0) != 4) return 1;
  printf("mail=%.4s\n", mail);
  return memcmp(head, "head", 4) == 0 && memcmp(mail, "tail", 4) == 0 ? 0 : 1;
}
