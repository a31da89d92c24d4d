from horizon.placeholder import not_implemented

not_implemented("diagnostics", issue=4)
