/* Built with -fno-asynchronous-unwind-tables -fno-unwind-tables: no FDE covers mid. */
void hot_leaf(unsigned long n);

__attribute__((noinline)) void mid(unsigned long n)
{
	hot_leaf(n);
	__asm__ volatile("" ::: "memory");
}
