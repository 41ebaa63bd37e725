// C++ access to libcrpm's persistent heap (docs/heap.md): an allocator for
// the standard containers and object helpers.  Header-only over crpm.h.
//
//   using Map = std::unordered_map<long, long, std::hash<long>, std::equal_to<long>,
//                                  crpm::allocator<std::pair<const long, long>>>;
//   Map *m = crpm::make<Map>();              // the container itself in the heap
//   crpm_set_root(0, m);                     // found again after crpm_recover
//   ... (*m)[k] = v; crpm_checkpoint(...) ...
//   crpm::destroy(m);
//
// Containers and everything they point to must live in the heap: make the
// container object itself with crpm::make (node-based containers keep
// pointers to their own header, std::string to its own buffer), and store in
// it only plain data, pointers into the heap and other containers that use
// crpm::allocator.  Allocation failures throw std::bad_alloc (the reason is
// in crpm_last_error()).  Thread safety is crpm_malloc's: one lock per heap.
#ifndef CRPM_ALLOCATOR_HPP
#define CRPM_ALLOCATOR_HPP

#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "crpm.h"

namespace crpm {

namespace detail {
// Storage for n objects of alignment `align` from the heap, or bad_alloc.
// Types aligned to 8 bytes or less may get 8-aligned blocks of 24, 40 or 56
// bytes (a map node of two 8-byte fields and a pointer wastes nothing).
inline void *allocate_bytes(std::size_t bytes, std::size_t align)
{
    void *p = align != 16 ? crpm_aligned_alloc(align < 8 ? 8 : align, bytes) : crpm_malloc(bytes);
    if (!p)
        throw std::bad_alloc();
    return p;
}
} // namespace detail

// Satisfies the standard Allocator requirements; stateless (every instance
// allocates from the one heap, so all compare equal).
template <class T>
class allocator {
public:
    using value_type = T;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    using is_always_equal = std::true_type;
    template <class U>
    struct rebind {
        using other = allocator<U>;
    };

    allocator() noexcept = default;
    template <class U>
    allocator(const allocator<U> &) noexcept {}

    T *allocate(std::size_t n)
    {
        static_assert(alignof(T) <= 4096, "crpm::allocator: alignments above 4096 bytes are not supported");
        if (n > max_size())
            throw std::bad_array_new_length();
        return static_cast<T *>(detail::allocate_bytes(n * sizeof(T), alignof(T)));
    }
    void deallocate(T *p, std::size_t) noexcept { crpm_free(p); }
    size_type max_size() const noexcept { return std::numeric_limits<size_type>::max() / sizeof(T); }
};

template <class T, class U>
bool operator==(const allocator<T> &, const allocator<U> &) noexcept
{
    return true;
}
template <class T, class U>
bool operator!=(const allocator<T> &, const allocator<U> &) noexcept
{
    return false;
}

// A T constructed in the heap; bad_alloc when the heap is full (or absent).
template <class T, class... Args>
T *make(Args &&...args)
{
    static_assert(alignof(T) <= 4096, "crpm::make: alignments above 4096 bytes are not supported");
    void *p = detail::allocate_bytes(sizeof(T), alignof(T));
    try {
        return ::new (p) T(std::forward<Args>(args)...);
    } catch (...) {
        crpm_free(p);
        throw;
    }
}

// Destroys and frees an object made by crpm::make (NULL: nothing).
template <class T>
void destroy(T *p) noexcept(std::is_nothrow_destructible<T>::value)
{
    if (p) {
        p->~T();
        crpm_free(const_cast<typename std::remove_cv<T>::type *>(p));
    }
}

// The object in root idx (NULL when unset), typed.
template <class T>
T *root(int idx)
{
    return static_cast<T *>(crpm_get_root(idx));
}

} // namespace crpm

#endif // CRPM_ALLOCATOR_HPP
