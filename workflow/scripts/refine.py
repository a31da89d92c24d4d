from horizon.placeholder import not_implemented

not_implemented("refine", issue=3)
