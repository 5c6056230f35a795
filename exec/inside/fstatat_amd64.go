package inside

import "syscall"

const sysFstatat = syscall.SYS_NEWFSTATAT
